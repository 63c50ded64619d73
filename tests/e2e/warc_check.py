"""The replay check of an e2e crawl's WARC output: pages read back from S3 through the CDXJ index by range
request, their digests checked and their bodies compared with what the synthetic web serves; every file
accepted by warcio's checker; no fetch written twice."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from minio import Minio
from streamcrawl_synthweb.model import SynthWeb
from streamcrawl_synthweb.pages import render_page, robots_spec
from warcio.archiveiterator import ArchiveIterator


def _cdxj(client: Minio, bucket: str) -> list[tuple[str, str, dict[str, Any]]]:
    lines = []
    for obj in client.list_objects(bucket, prefix="warc/", recursive=True):
        if obj.object_name.endswith(".cdxj"):
            text = client.get_object(bucket, obj.object_name).read().decode()
            rows = text.splitlines()
            assert rows == sorted(rows), f"{obj.object_name} is not sorted"
            for row in rows:
                key, ts, fields = row.split(" ", 2)
                lines.append((key, ts, json.loads(fields)))
    return lines


def _range(client: Minio, bucket: str, key: str, offset: int, length: int) -> bytes:
    resp = client.get_object(bucket, key, offset=offset, length=length)
    try:
        return bytes(resp.read())
    finally:
        resp.close()
        resp.release_conn()


def _digest(body: bytes) -> str:
    return "sha256:" + base64.b32encode(hashlib.sha256(body).digest()).decode()


def _served_versions(web: SynthWeb, url: str, max_version: int) -> set[bytes] | None:
    """What the synthetic web serves at ``url`` in any content version (None: not a table page)."""
    parts = urlsplit(url)
    host = next((h for h in web.hosts if h.name == parts.hostname), None)
    if host is None or host.kind == "trap_session":
        return None
    page = host.pages.get(parts.path + (f"?{parts.query}" if parts.query else "")) or host.pages.get(parts.path)
    if page is None or page.kind in ("redirect", "error", "big"):
        return None
    versions = range(max_version + 1) if host.kind == "changing" else range(1)
    return {render_page(web, host, page, version=v).body for v in versions}


def check_warc(client: Minio, bucket: str, msgs: list[dict[str, Any]], web: SynthWeb, workdir: Path,
               max_version: int = 1000, sample: int = 60) -> dict[str, int]:
    index = _cdxj(client, bucket)
    assert index, "no CDXJ index in the bucket"
    by_loc = {(f["filename"], int(f["offset"])): (key, ts, f) for key, ts, f in index}
    missing = [m["url"] for m in msgs if m.get("warc_filename") is None]
    assert not missing, f"{len(missing)} page_fetched messages without a WARC location, e.g. {missing[:3]}"
    compared = 0
    for m in msgs[:sample]:
        name = Path(m["warc_filename"]).name
        entry = by_loc.get((name, m["warc_offset"]))
        assert entry is not None, f"{m['url']}: no CDXJ line at {name}:{m['warc_offset']}"
        _key, _ts, fields = entry
        assert fields["url"] == m["url"] and int(fields["length"]) == m["warc_length"]
        raw = _range(client, bucket, m["warc_filename"], m["warc_offset"], m["warc_length"])
        # ArchiveIterator streams: a record's content is read while iterating
        records = [(r, r.content_stream().read()) for r in ArchiveIterator(io.BytesIO(raw))]
        assert len(records) == 1, f"{m['url']}: the range holds {len(records)} records"
        rec, body = records[0]
        assert rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == m["url"]
        assert rec.rec_headers.get_header("WARC-IP-Address", "").startswith("127.")
        digest = rec.rec_headers.get_header("WARC-Payload-Digest")
        assert digest == _digest(body) == fields["digest"], m["url"]
        assert hashlib.sha256(body).hexdigest() == m["content_hash"], m["url"]
        served = _served_versions(web, m["url"], max_version)
        if served is not None:
            assert body in served, f"{m['url']}: the archived body is not what the synthetic web serves"
            compared += 1
    # every file passes warcio's checker (record structure, block and payload digests)
    files = []
    for obj in client.list_objects(bucket, prefix="warc/", recursive=True):
        if obj.object_name.endswith(".warc.gz"):
            path = workdir / Path(obj.object_name).name
            client.fget_object(bucket, obj.object_name, str(path))
            files.append(str(path))
    assert files
    check = subprocess.run([sys.executable, "-c", "from warcio.cli import main; main()", "check", *files],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    # at-least-once never writes a fetch twice (record ids are derived from the fetch's exchange id)
    ids: Counter[str] = Counter()
    for path in files:
        with open(path, "rb") as fh:
            ids.update(r.rec_headers.get_header("WARC-Record-ID") for r in ArchiveIterator(fh))
    twice = [i for i, n in ids.items() if n > 1]
    assert not twice, f"{len(twice)} records written twice, e.g. {twice[:3]}"
    # the fetcher's own requests are fetches too: every host a page was published from had its robots.txt
    # archived (its 2xx body as the synthetic web served it), and the soft-404 probes are archived
    robots = {f["url"]: f for _k, _ts, f in index if urlsplit(f["url"]).path == "/robots.txt"}
    robots_hosts = {urlsplit(u).hostname for u in robots}
    unarchived = {urlsplit(m["url"]).hostname for m in msgs} - robots_hosts
    assert not unarchived, f"{len(unarchived)} hosts' robots.txt not archived, e.g. {sorted(unarchived)[:3]}"
    probes = [f for _k, _ts, f in index if urlsplit(f["url"]).path.startswith("/streamcrawl-probe-")]
    assert probes, "no soft-404 probe archived"
    kinds = {h.name: h.kind for h in web.hosts}
    for f in list(robots.values())[:sample]:
        key = f"warc/{f['filename'].rsplit('-', 2)[1]}/{f['filename']}"
        raw = _range(client, bucket, key, int(f["offset"]), int(f["length"]))
        [(rec, body)] = [(r, r.content_stream().read()) for r in ArchiveIterator(io.BytesIO(raw))]
        assert rec.rec_type == "response" and rec.http_headers.get_statuscode() == f["status"]
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == _digest(body) == f["digest"]
        kind = kinds.get(urlsplit(f["url"]).hostname or "")
        if f["status"] == "200" and kind is not None:
            assert body == robots_spec(kind, web.profile).body.encode(), (f["url"], body[:80])
    # a robots.txt redirect: both hops
    for name, kind in kinds.items():
        if kind == "robots_redirect" and name in robots_hosts:
            assert any(urlsplit(u).hostname == name and urlsplit(u).path == "/robots-real.txt"
                       for _k, _ts, f in index for u in [f["url"]]), name
    revisits = sum(1 for _k, _ts, f in index if f.get("mime") == "warc/revisit")
    return {"warc_files": len(files), "cdxj_lines": len(index), "revisits": revisits, "compared_bodies": compared,
            "robots_records": len(robots), "probe_records": len(probes)}
