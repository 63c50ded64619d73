"""Dedup service: the URL seen-set (Bloom + exact store), content dedup (SHA-256 + SimHash), trap rules
and budgets, and the public page_fetched stream."""
