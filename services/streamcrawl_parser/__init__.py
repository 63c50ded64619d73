"""Parser service: fetched HTML in, ParsedPage out (links, canonical, robots meta, title, text SimHash)."""
