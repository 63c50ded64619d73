"""streamcrawl control plane: a FastAPI service for seeds, the blocklist, per-host overrides and stats."""
