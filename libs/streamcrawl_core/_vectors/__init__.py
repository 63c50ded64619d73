"""Static data files shipped with streamcrawl_core (a package only so that setuptools bundles them)."""
