"""The replay check of an e2e crawl's WARC output: pages read back from S3 through the CDXJ index by range
request, their payload digests checked over the body as received (Content-Encoding kept), the body
decoded per its Content-Encoding and compared with page_fetched's content hash and with what the
synthetic web serves; every page record as its host sent it (br or gzip, chunked or not: `wire_style`);
every file accepted by warcio's checker; no fetch written twice."""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from minio import Minio
from streamcrawl_synthweb.model import Host, Page, SynthWeb
from streamcrawl_synthweb.pages import render_page, robots_spec
from streamcrawl_synthweb.server import wire_style
from warcio.archiveiterator import ArchiveIterator

from tests.warcio_check import decode_payload, warcio_check


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


def _payload(rec: Any) -> tuple[bytes, bytes]:
    """(the payload as recorded, that payload decoded per its Content-Encoding). warcio's content_stream
    is not used: it cannot decode br with the installed brotli (tests/warcio_check.py)."""
    raw = bytes(rec.raw_stream.read())
    return raw, decode_payload(raw, rec.http_headers.get_header("Content-Encoding"))


def _page_of(web: SynthWeb, url: str) -> tuple[Host | None, Page | None]:
    parts = urlsplit(url)
    host = next((h for h in web.hosts if h.name == parts.hostname), None)
    if host is None:
        return None, None
    return host, host.pages.get(parts.path + (f"?{parts.query}" if parts.query else "")) or host.pages.get(parts.path)


def _served_versions(web: SynthWeb, url: str, max_version: int) -> set[bytes] | None:
    """What the synthetic web serves at ``url`` in any content version (None: not a table page)."""
    host, page = _page_of(web, url)
    if host is None or host.kind == "trap_session":
        return None
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
        records = [(r, *_payload(r)) for r in ArchiveIterator(io.BytesIO(raw))]
        assert len(records) == 1, f"{m['url']}: the range holds {len(records)} records"
        rec, wire, body = records[0]
        assert rec.rec_type == "response" and rec.rec_headers.get_header("WARC-Target-URI") == m["url"]
        assert rec.rec_headers.get_header("WARC-IP-Address", "").startswith("127.")
        # the digest is over the body as received; decoded, it is the body page_fetched names
        digest = rec.rec_headers.get_header("WARC-Payload-Digest")
        assert digest == _digest(wire) == fields["digest"], m["url"]
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
    check = warcio_check(files)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    wire = _wire_forms(files, msgs, web)
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
        [(rec, as_received, body)] = [(r, *_payload(r)) for r in ArchiveIterator(io.BytesIO(raw))]
        assert rec.rec_type == "response" and rec.http_headers.get_statuscode() == f["status"]
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == _digest(as_received) == f["digest"]
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
            "robots_records": len(robots), "probe_records": len(probes), **wire}


def _wire_forms(files: list[str], msgs: list[dict[str, Any]], web: SynthWeb) -> dict[str, int]:
    """Every published HTML page's response record holds its body as its host sent it: br, or gzip (chunked
    on some hosts: the framing removed, Transfer-Encoding kept as X-Crawler-Transfer-Encoding), its
    digest over those bytes and its decoded form the page's content hash; a streamed big page identity and
    chunked; and the crawl met every form."""
    records: dict[str, tuple[str | None, str | None, str | None, str]] = {}
    for path in files:
        with open(path, "rb") as fh:
            for r in ArchiveIterator(fh):
                if r.rec_type != "response":
                    continue
                if r.rec_headers.get_header("WARC-Truncated"):
                    continue  # cut at the body cap (or stored without a body): not a whole coded stream
                wire, body = _payload(r)
                assert r.rec_headers.get_header("WARC-Payload-Digest") == _digest(wire)
                h = r.http_headers
                assert h.get_header("Transfer-Encoding") is None
                assert h.get_header("Content-Length") == str(len(wire))
                records[r.rec_headers.get_header("WARC-Record-ID")] = (
                    r.rec_headers.get_header("WARC-Target-URI"), h.get_header("Content-Encoding"),
                    h.get_header("X-Crawler-Transfer-Encoding"), hashlib.sha256(body).hexdigest())
    by_url = {url: (coding, te, sha) for url, coding, te, sha in records.values()}
    forms: Counter[str] = Counter()
    for m in msgs:
        if not (m.get("content_type") or "").startswith("text/html") or m["url"] not in by_url:
            continue
        coding, te, sha = by_url[m["url"]]
        if sha != m["content_hash"]:
            continue  # the URL's last record is a later fetch (a changed page): checked by the sample above
        _host, page = _page_of(web, m["url"])
        if page is not None and page.kind == "big":  # streamed, never compressed
            assert coding is None and te == "chunked", (m["url"], coding, te)
            forms["identity_chunked_records"] += 1
            continue
        prefer_gzip, chunked = wire_style(urlsplit(m["url"]).hostname or "")
        assert coding == ("gzip" if prefer_gzip else "br"), (m["url"], coding)
        assert (te == "chunked") == chunked, (m["url"], te)
        forms[f"{coding}{'_chunked' if chunked else ''}_records"] += 1
    assert {"br_records", "gzip_records", "gzip_chunked_records"} <= set(forms), forms
    return dict(forms)
