"""`streamcrawl stack up|down|status|reset`: the local engines (Kafka, Cassandra, the S3 store) of a source
checkout, through its stack/stackctl.py (the same as `make stack-up` and friends)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

NAME = "stack"
HELP = "start, stop or show the local Kafka, Cassandra and S3 store (a source checkout)"
DESCRIPTION = ("Manage the local stack of a source checkout (no Docker): up fetches and starts the engines on "
               "loopback and provisions topics, tables and the bucket; down stops what up started; status shows "
               "them. STREAMCRAWL_STACK_DIR picks another stack directory. Exit code: stackctl's (0 ok, 1 failed).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status", "reset"), help="what to do")
    parser.add_argument("--checkout", type=Path, default=None,
                        help="the source checkout (default: the current directory or the one this package runs from)")


def find_stackctl(checkout: Path | None) -> Path | None:
    candidates = [checkout] if checkout else [Path.cwd(), Path(__file__).resolve().parents[3]]
    for root in candidates:
        if root is not None and (root / "stack" / "stackctl.py").is_file():
            return root / "stack" / "stackctl.py"
    return None


def run(args: argparse.Namespace) -> int:
    script = find_stackctl(args.checkout)
    if script is None:
        print("streamcrawl stack: no stack/stackctl.py here: run it in a source checkout (or pass --checkout); "
              "an installed streamcrawl uses engines you run yourself", file=sys.stderr)
        return 2
    return subprocess.call([sys.executable, str(script), args.action], cwd=script.parent.parent, env=dict(os.environ))
