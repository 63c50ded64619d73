"""Export the message models as JSON Schema into schemas/json; `--check` fails on drift (CI/lint)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from streamcrawl_contracts.messages import MODELS
from streamcrawl_contracts.topics import ALL_TOPICS, DEFAULT_PARTITIONS

OUT = Path(__file__).resolve().parents[2] / "schemas" / "json"


def render() -> dict[str, str]:
    files = {f"{name}.schema.json": json.dumps(model.model_json_schema(), indent=2, sort_keys=True) + "\n"
             for name, model in MODELS.items()}
    # A host-keyed topic's count is the deployment's STREAMCRAWL_PARTITIONS (shown with its default).
    topics = [{"name": t.name, "key": t.key.value,
               "partitions": t.fixed_partitions if t.fixed_partitions is not None
               else {"setting": "STREAMCRAWL_PARTITIONS", "default": DEFAULT_PARTITIONS},
               "retention_ms": t.retention_ms, "description": t.description} for t in ALL_TOPICS]
    files["topics.json"] = json.dumps(topics, indent=2) + "\n"
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if schemas/json differs from the models")
    args = parser.parse_args(argv)
    files = render()
    if args.check:
        drift = [n for n, text in files.items() if not (OUT / n).exists() or (OUT / n).read_text() != text]
        stale = [p.name for p in OUT.glob("*.json") if p.name not in files]
        if drift or stale:
            print(f"schemas/json is out of date ({', '.join(drift + stale)}): run `make schemas`", file=sys.stderr)
            return 1
        print(f"schemas/json matches the models ({len(files)} files)")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (OUT / name).write_text(text)
    print(f"wrote {len(files)} files to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
