"""`python -m streamcrawl_launcher` is `streamcrawl run` (make run)."""

import sys

from streamcrawl_launcher.command import main

sys.exit(main())
