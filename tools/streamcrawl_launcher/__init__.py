"""streamcrawl_launcher: runs a whole crawl on one machine (make run, e2e tests, benchmarks)."""
