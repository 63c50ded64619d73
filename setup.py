"""Build step that ships the repository's top-level schemas/ (CQL migrations, JSON Schemas) in the wheel as
package data of `streamcrawl_schemas`, with no second copy in the source tree. All other metadata is in
pyproject.toml. An editable install skips the copy: it reads schemas/ of the checkout."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SCHEMAS = Path(__file__).resolve().parent / "schemas"
KINDS = {"cql": "*.cql", "json": "*.json"}


class BuildPyWithSchemas(build_py):
    """build_py, then schemas/<kind>/ -> <build>/streamcrawl_schemas/<kind>/."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        for kind, pattern in KINDS.items():
            sources = sorted((SCHEMAS / kind).glob(pattern))
            if not sources:
                raise SystemExit(f"setup.py: no {pattern} files in {SCHEMAS / kind}")
            target = Path(self.build_lib) / "streamcrawl_schemas" / kind
            target.mkdir(parents=True, exist_ok=True)
            for src in sources:
                shutil.copy2(src, target / src.name)


setup(cmdclass={"build_py": BuildPyWithSchemas})
