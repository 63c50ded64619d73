"""Recrawl scheduler: adapts each URL's revisit interval from its fetch outcomes and emits due URLs."""
