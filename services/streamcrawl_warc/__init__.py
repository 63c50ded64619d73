"""WARC writer service: archive records in, WARC/1.1 files with CDXJ indexes in S3, page_fetched out."""
