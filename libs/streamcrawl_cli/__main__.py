"""`python -m streamcrawl_cli` is the `streamcrawl` command."""

import sys

from streamcrawl_cli.main import main

sys.exit(main())
