"""Fetcher service: leased FetchRequests in, FetchResults out (robots, DNS, conditional GET, body to S3)."""
