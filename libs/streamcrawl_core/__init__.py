"""streamcrawl_core: pure crawl logic (URLs, fingerprints, seen set, SimHash, robots, traps, politeness,
recrawl, frontier). It imports no I/O client: every rule here is unit-tested without a running service."""
