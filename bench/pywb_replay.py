"""Replay our WARC/CDXJ output with pywb (README "WARC files"): the files of the stack's bucket (or of a small
crawl run first, or of a folder) go into two pywb collections, one indexed by pywb itself (`wb-manager add`),
one served from our own CDXJ files; `wayback` runs on 127.0.0.1 and every sampled capture is fetched raw
(`/<coll>/<ts>id_/<url>`), rewritten (`/<coll>/<ts>mp_/<url>`) and in pywb's replay frame
(`/<coll>/<ts>/<url>`) from both. A raw replay must give the body the record holds, decoded per its
Content-Encoding (pywb decodes it; here it is decoded with the brotli bindings this repository pins); with the
synthetic web known (--crawl, or --hosts/--web-seed/--profile of the crawl that wrote the files) also what the
synthetic web serves. A revisit must replay the body of the capture it refers to. One line of JSON per form
(br, gzip, gzip_chunked, identity, ...), then a summary; exit 1 on a mismatch.

pywb is not a dependency of streamcrawl: it runs from its own venv (--pywb-venv, built with PYWB_PINS when it
has no pywb; /tmp/pywb-venv by default). This script runs in the repository's venv
(minio, warcio, the launcher). `--crawl` resets the crawl on the stack like the e2e tests: run it when no
other crawl uses the stack (on a shared machine, under its heavy-run lock).
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from warcio.archiveiterator import ArchiveIterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.warcio_check import decode_payload  # (Google's brotli, gzip, deflate)

COLLS = ("pywb", "ours")  # indexed by wb-manager / served from our CDXJ files
#: What --pywb-venv gets when it has no pywb yet: the version tried, and the brotli reader its warcio needs
#: (brotlipy's API; Google's brotli bindings fail there, README "WARC files").
PYWB_PINS = ("pywb==2.10.0", "brotlipy==0.7.0")
BOOTSTRAP_PINS = ("pip==26.3", "setuptools==84.2.1")  # as the Makefile's venv


@dataclass
class Capture:
    url: str
    ts: str
    form: str
    status: str
    body: bytes | None  # decoded payload (None: a revisit, resolved by digest)
    digest: str
    mime: str


@dataclass
class Tally:
    sampled: int = 0
    raw_ok: Counter[str] = field(default_factory=Counter)
    rewritten_ok: Counter[str] = field(default_factory=Counter)
    frame_ok: Counter[str] = field(default_factory=Counter)
    served_ok: int = 0
    served_compared: int = 0
    failures: list[str] = field(default_factory=list)


def _ts14(warc_date: str) -> str:
    return "".join(ch for ch in warc_date if ch.isdigit())[:14]


def form_of(rec: Any) -> str:
    """br, gzip, gzip_chunked, identity, identity_chunked, decoded (recorded decoded, the codings under
    X-Crawler-Content-Encoding), truncated, no_body; plus revisit, robots (any form)."""
    h = rec.http_headers
    if rec.rec_type == "revisit":
        return "revisit"
    if urlsplit(rec.rec_headers.get_header("WARC-Target-URI")).path == "/robots.txt":
        return "robots"
    trunc = rec.rec_headers.get_header("WARC-Truncated")
    if trunc == "unspecified":
        return "no_body"
    if trunc:
        return "truncated"
    if h.get_header("X-Crawler-Content-Encoding"):
        return "decoded"
    coding = (h.get_header("Content-Encoding") or "identity").lower()
    return coding + ("_chunked" if h.get_header("X-Crawler-Transfer-Encoding") else "")


def read_captures(files: list[Path]) -> list[Capture]:
    out = []
    for path in files:
        with path.open("rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type not in ("response", "revisit"):
                    continue
                h = rec.http_headers
                raw = bytes(rec.raw_stream.read())
                form = form_of(rec)
                body = None if form == "revisit" else decode_payload(raw, h.get_header("Content-Encoding"))
                out.append(Capture(rec.rec_headers.get_header("WARC-Target-URI"),
                                   _ts14(rec.rec_headers.get_header("WARC-Date")), form, h.get_statuscode(),
                                   body, rec.rec_headers.get_header("WARC-Payload-Digest") or "",
                                   (h.get_header("Content-Type") or "").split(";")[0]))
    return out


def ensure_venv(venv: Path) -> None:
    """A venv of its own with PYWB_PINS, built with this interpreter's base Python unless it has pywb."""
    if (venv / "bin" / "wayback").exists():
        return
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, *BOOTSTRAP_PINS], check=True)
    subprocess.run([*pip, *PYWB_PINS], check=True)


def download(dest: Path) -> list[Path]:
    from streamcrawl_runtime.connect import minio_client
    from streamcrawl_runtime.settings import StackSettings

    settings = StackSettings()
    client = minio_client(settings)
    dest.mkdir(parents=True, exist_ok=True)
    for obj in client.list_objects(settings.s3_bucket, prefix="warc/", recursive=True):
        name = obj.object_name
        if name.endswith((".warc.gz", ".cdxj")):
            client.fget_object(settings.s3_bucket, name, str(dest / Path(name).name))
    return sorted(dest.glob("*.warc.gz"))


def run_crawl(workdir: Path, hosts: int, seed: int, profile: str, timeout_s: float) -> None:
    from streamcrawl_launcher.crawl import Crawl, CrawlOptions

    crawl = Crawl(CrawlOptions(workdir=workdir, hosts=hosts, web_seed=seed, log_level="WARNING",
                               extra_env={"STREAMCRAWL_FETCHER_SITEMAPS": "false"},
                               synthweb_args=["--profile", profile, "--robots-timeout", "10"]))
    crawl.start()
    try:
        crawl.seed(crawl.manifest["seeds"])
        try:
            crawl.wait_idle(idle_s=15, timeout_s=timeout_s, every_s=5)
        except TimeoutError as exc:  # URLs left on long politeness timers: the files so far will do
            print(f"{exc}; stopping the crawl", file=sys.stderr)
    finally:
        crawl.stop()


def setup_pywb(venv: Path, root: Path, files: list[Path]) -> dict[str, Any]:
    """Two collections over the same files; returns how pywb's index compares with ours."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    wbm = str(venv / "bin" / "wb-manager")
    for coll in COLLS:
        subprocess.run([wbm, "init", coll], cwd=root, check=True, capture_output=True)
    t0 = time.monotonic()
    add = subprocess.run([wbm, "add", "pywb", *map(str, files)], cwd=root, capture_output=True, text=True)
    if add.returncode != 0:
        raise RuntimeError(f"wb-manager add failed: {add.stderr[-2000:]}")
    add_s = time.monotonic() - t0
    ours = root / "collections" / "ours"
    lines: list[str] = []
    for path in files:
        os.symlink(path.resolve(), ours / "archive" / path.name)
        cdxj = path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj")
        lines += cdxj.read_text().splitlines()
    lines.sort()
    (ours / "indexes" / "index.cdxj").write_text("".join(f"{line}\n" for line in lines))
    theirs = sorted((root / "collections" / "pywb" / "indexes" / "index.cdxj").read_text().splitlines())
    return {"wb_manager_add_s": round(add_s, 2), "index_lines": {"ours": len(lines), "pywb": len(theirs)},
            **compare_indexes(lines, theirs)}


def compare_indexes(ours: list[str], theirs: list[str]) -> dict[str, Any]:
    """Lines keyed by (SURT, timestamp, filename, offset); which fields differ between the two indexers."""
    def keyed(rows: list[str]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
        out = {}
        for row in rows:
            surt, ts, rest = row.split(" ", 2)
            f = json.loads(rest)
            out[(surt, ts, f["filename"], f["offset"])] = f
        return out
    a, b = keyed(ours), keyed(theirs)
    diff: Counter[str] = Counter()
    for k in a.keys() & b.keys():
        for name in a[k].keys() | b[k].keys():
            if a[k].get(name) != b[k].get(name):
                diff[f"{name}: ours={a[k].get(name)!r} pywb={b[k].get(name)!r}" if name == "status" else name] += 1
    return {"index_only_ours": len(a.keys() - b.keys()), "index_only_pywb": len(b.keys() - a.keys()),
            "index_field_diffs": dict(diff)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_wayback(venv: Path, root: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:
        proc = subprocess.Popen([str(venv / "bin" / "wayback"), "-p", str(port), "-b", "127.0.0.1"], cwd=root,
                                stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"wayback exited: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("wayback did not listen within 60 s")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a replayed 3xx is checked as it is, not followed


_OPENER = urllib.request.build_opener(_NoRedirect)


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers={"Accept-Encoding": "identity"})
    try:
        with _OPENER.open(req, timeout=30) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def served_bodies(web: Any, url: str) -> set[bytes] | None:
    """What the synthetic web serves at ``url`` (None: not a page the generator can render here)."""
    from streamcrawl_synthweb.pages import render_page, robots_spec

    parts = urlsplit(url)
    host = next((h for h in web.hosts if h.name == parts.hostname), None)
    if host is None or host.kind in ("trap_session", "changing"):
        return None
    if parts.path == "/robots.txt":
        return {robots_spec(host.kind, web.profile).body.encode()}
    page = host.pages.get(parts.path + (f"?{parts.query}" if parts.query else "")) or host.pages.get(parts.path)
    if page is None or page.kind in ("redirect", "error", "big"):
        return None
    return {render_page(web, host, page).body}


def check(base: str, caps: list[Capture], per_form: int, web: Any) -> dict[str, Tally]:
    by_digest = {c.digest: c.body for c in caps if c.body is not None}
    picked: dict[str, list[Capture]] = defaultdict(list)
    seen: set[tuple[str, str]] = set()
    for c in caps:
        # one capture per URL and second: pywb resolves <ts>/<url> to the closest capture
        if len(picked[c.form]) < per_form and (c.url, c.ts) not in seen:
            seen.add((c.url, c.ts))
            picked[c.form].append(c)
    tallies: dict[str, Tally] = {}
    for form, sample in sorted(picked.items()):
        t = tallies[form] = Tally()
        for c in sample:
            t.sampled += 1
            want = c.body if c.body is not None else by_digest.get(c.digest)
            for coll in COLLS:
                status, _headers, body = get(f"{base}/{coll}/{c.ts}id_/{c.url}")
                if str(status) == c.status and (want is None or body == want):
                    t.raw_ok[coll] += 1
                else:
                    t.failures.append(f"{coll} id_ {c.ts} {c.url}: HTTP {status} (recorded {c.status}), "
                                      f"{len(body)} bytes, want {None if want is None else len(want)}"
                                      f"{', ' + _pywb_error(body) if status >= 500 else ''}")
                # the rewritten capture (mp_, what the replay frame loads): for HTML, wombat inserted, the
                # page's own title kept and its links pointing into the collection
                status, _headers, body = get(f"{base}/{coll}/{c.ts}mp_/{c.url}")
                page = want if want is not None and c.mime == "text/html" and b"<title>" in want else None
                text_ok = page is None or (_title(page) in body and b"wombat" in body
                                       and (b"href=" not in page or f"/{coll}/{c.ts}mp_/".encode() in body))
                if str(status) == c.status and text_ok:
                    t.rewritten_ok[coll] += 1
                else:
                    t.failures.append(f"{coll} mp_ {c.ts} {c.url}: HTTP {status} (recorded {c.status}), "
                                      f"title/wombat/links rewritten: {text_ok}")
                # the replay page (the frame with pywb's banner) around it
                status, _headers, body = get(f"{base}/{coll}/{c.ts}/{c.url}")
                if status == 200 and b"new ContentFrame" in body and f'"{c.url}"'.encode() in body:
                    t.frame_ok[coll] += 1
                else:
                    t.failures.append(f"{coll} frame {c.ts} {c.url}: HTTP {status}")
            if web is not None and want is not None and c.status == "200":
                served = served_bodies(web, c.url)
                if served is not None:
                    t.served_compared += 1
                    t.served_ok += want in served
                    if want not in served:
                        t.failures.append(f"{c.url}: the record's decoded body is not what the synthetic web serves")
    return tallies


def _pywb_error(page: bytes) -> str:
    """The message of pywb's error page (its <pre>), e.g. the exception a record's decoding raised."""
    m = re.search(rb"<pre>(.*?)</pre>", page, re.S)
    return html.unescape(m.group(1).decode(errors="replace")) if m else page[:120].decode(errors="replace")


def _title(body: bytes) -> bytes:
    start = body.find(b"<title>")
    return body[start:body.find(b"</title>", start) + 8] if start >= 0 else b""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pywb-venv", type=Path, default=Path("/tmp/pywb-venv"))
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/pywb-replay"))
    ap.add_argument("--files", type=Path, help="a folder of .warc.gz + .cdxj files (default: the stack's bucket)")
    ap.add_argument("--crawl", action="store_true", help="run a small crawl first (resets the crawl on the stack)")
    ap.add_argument("--crawl-timeout", type=float, default=300.0, help="stop the crawl after this long (s)")
    ap.add_argument("--hosts", type=int, help="the synthetic web's size (with --crawl: 60)")
    ap.add_argument("--web-seed", type=int, default=11)
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--per-form", type=int, default=20, help="captures replayed per form")
    ap.add_argument("--port", type=int, default=0, help="wayback's port on 127.0.0.1 (0: a free one)")
    args = ap.parse_args()
    ensure_venv(args.pywb_venv)
    work = args.workdir.resolve()
    version = subprocess.run([str(args.pywb_venv / "bin" / "python"), "-c",
                              "import pywb, brotli; print(pywb.__version__, brotli.__file__)"],
                             capture_output=True, text=True, check=True).stdout.split()
    hosts = args.hosts or (60 if args.crawl else None)
    if args.crawl:
        assert hosts is not None
        run_crawl(work / "crawl", hosts, args.web_seed, args.profile, args.crawl_timeout)
    if args.files:
        files = sorted(args.files.resolve().glob("*.warc.gz"))
    else:
        shutil.rmtree(work / "warc", ignore_errors=True)
        files = download(work / "warc")
    if not files:
        print("no WARC files", file=sys.stderr)
        return 2
    web = None
    if hosts:
        from streamcrawl_synthweb.generator import generate
        web = generate(hosts, args.web_seed, args.profile)
    caps = read_captures(files)
    summary: dict[str, Any] = {"pywb": version[0], "brotli_module": version[1], "warc_files": len(files),
                               "captures": dict(Counter(c.form for c in caps))}
    summary.update(setup_pywb(args.pywb_venv, work / "pywb", files))
    port = args.port or _free_port()
    proc = start_wayback(args.pywb_venv, work / "pywb", port, work / "wayback.log")
    try:
        tallies = check(f"http://127.0.0.1:{port}", caps, args.per_form, web)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    bad = 0
    for form, t in tallies.items():
        bad += len(t.failures)
        print(json.dumps({"form": form, "sampled": t.sampled, "raw_ok": dict(t.raw_ok),
                          "rewritten_ok": dict(t.rewritten_ok), "frame_ok": dict(t.frame_ok),
                          "served_compared": t.served_compared,
                          "served_ok": t.served_ok, "failures": t.failures[:5], "n_failures": len(t.failures)}))
    summary["failures"] = bad
    print(json.dumps(summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
