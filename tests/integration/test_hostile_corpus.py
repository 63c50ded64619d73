"""The hostile-web corpus (streamcrawl_synthweb.hostile_cases, 67 cases; docs/hostile-corpus.md) through
the real fetcher and parser, each a process of its own under the shared run loop, on the real Kafka,
Cassandra and S3 store. Every case must reach its defined outcome; no case may crash a consumer or stall
a partition (every result arrives within the time bound, both processes are alive at the end and drain
on SIGTERM); each process's peak RSS stays under the chart's memory limit for it (512 MiB)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from streamcrawl_contracts.messages import FetchRequest, FetchResult, ParsedPage
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_synthweb.hostile import HostileWeb
from streamcrawl_synthweb.hostile_cases import CASES, Case

from tests.integration.kafka_helpers import MAX_RECORD_BYTES, make_topics, read_topic

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The chart's memory limit for the fetcher and for the parser (helm/streamcrawl/values.yaml).
RSS_BOUND_KIB = 512 * 1024
RESULTS_WITHIN_S = 150.0


def _certificate(folder: Path) -> ssl.SSLContext:
    if shutil.which("openssl") is None:
        pytest.fail("no openssl command to make the TLS case's certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-keyout", str(key), "-out", str(cert), "-days", "2", "-nodes", "-subj", "/CN=other.example"],
                   check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    return ctx


class Served:
    """The hostile web on its own event loop in a thread (the test's thread does blocking Kafka I/O)."""

    def __init__(self, tls: ssl.SSLContext) -> None:
        self.web = HostileWeb(tls)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(self.web.start(), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.web.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def _spawn(service: str, src: str, dst: str, unique: str, ready: Path, dns_port: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.integration.hostile_service", service, src, dst,
                             f"{service}-hostile-{unique}", str(ready), str(dns_port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "STREAMCRAWL_LOG_LEVEL": "WARNING"})


def _request(url: str, host: str) -> FetchRequest:
    fp = url_fingerprint(url) if len(url) <= 8192 and url.isprintable() else 1
    return FetchRequest(url=url, host=host, url_fp=fp, lease_id=uuid.uuid4().hex, lease_expires_at=time.time() + 300)


def _check_parsed(case: Case, page: ParsedPage, zone: str) -> list[str]:
    want, bad = case.parsed or {}, []
    if "links" in want and len(page.out_links) != want["links"]:
        bad.append(f"{len(page.out_links)} links, want {want['links']}")
    if "simhash" in want and page.simhash != want["simhash"]:
        bad.append(f"simhash {page.simhash}")
    if want.get("no_control") and any(any(ord(ch) < 32 or ord(ch) == 127 for ch in u) for u in page.out_links):
        bad.append(f"a raw control character passed on: {page.out_links!r}")
    if "link_host" in want:
        host = str(want["link_host"])
        host = host.replace("hostile.test", zone) if host == "www.hostile.test" else host
        if [urlsplit(u).hostname for u in page.out_links] != [host]:
            bad.append(f"links {page.out_links}, want host {host}")
    if want.get("idn"):
        hosts = {urlsplit(u).hostname for u in page.out_links}
        if hosts != {"xn--pple-43d.hostile.test", "xn--a.hostile.test"}:
            bad.append(f"IDN links {sorted(h or '' for h in hosts)}")
    return bad


@pytest.mark.timeout(600)
def test_hostile_corpus(stack, crawl_cql, unique, tmp_path: Path) -> None:
    assert len(CASES) >= 50
    zone = f"z{unique}.hostile.test"
    req_t, res_t, parsed_t = f"t-hreq-{unique}", f"t-hres-{unique}", f"t-hparsed-{unique}"
    make_topics(stack.kafka_bootstrap, req_t, res_t, parsed_t, config={"max.message.bytes": str(MAX_RECORD_BYTES)})
    served = Served(_certificate(tmp_path))
    web = served.web
    hosts = {c.name: c.host.replace("hostile.test", zone) for c in CASES}

    async def preset() -> None:
        # robots.txt known (404: everything allowed) and no soft-404 probe, so each case is one request;
        # the robots cases fetch theirs.
        state = CassandraCrawlState(crawl_cql)
        for c in CASES:
            if not c.robots:
                await state.host_put_robots(hosts[c.name], 404, None, time.time(), None)
                await state.host_put_soft404(hosts[c.name], "none")

    asyncio.run(preset())
    fetcher = _spawn("fetcher", req_t, res_t, unique, tmp_path / "fetcher.ready", web.dns_port)
    parser = _spawn("parser", res_t, parsed_t, unique, tmp_path / "parser.ready", 0)
    procs = {"fetcher": fetcher, "parser": parser}
    # Placed as the frontier places them (murmur2 of the host): the run loop dead-letters a host-keyed
    # record on another partition than its host's.
    prod = host_keyed_producer(stack.kafka_bootstrap, **{"message.max.bytes": MAX_RECORD_BYTES})
    try:
        deadline = time.time() + 90
        while not all((tmp_path / f"{n}.ready").exists() for n in procs):
            assert all(p.poll() is None for p in procs.values()), "a service died on start"
            assert time.time() < deadline, "the services were not assigned their partitions"
            time.sleep(0.2)
        t0 = time.time()
        for c in CASES:
            prod.produce(req_t, key=hosts[c.name].encode(), value=_request(web.url(c, zone), hosts[c.name])
                         .model_dump_json().encode())
        assert prod.flush(30) == 0
        first = [FetchResult.model_validate_json(v) for v in
                 read_topic(stack.kafka_bootstrap, res_t, len(CASES), RESULTS_WITHIN_S)]
        wave1_s = time.time() - t0
        seconds = [c for c in CASES if c.then]
        for c in seconds:
            assert c.then is not None
            prod.produce(req_t, key=hosts[c.name].encode(),
                         value=_request(web.url(c, zone, c.then[0]), hosts[c.name]).model_dump_json().encode())
        assert prod.flush(30) == 0
        results = [FetchResult.model_validate_json(v) for v in
                   read_topic(stack.kafka_bootstrap, res_t, len(CASES) + len(seconds), 60)]
        fetched = [r for r in results if r.outcome == "fetched"]
        parsed = {p.url: p for p in (ParsedPage.model_validate_json(v) for v in
                                     read_topic(stack.kafka_bootstrap, parsed_t, len(fetched), 120))}
        alive = {n: p.poll() is None for n, p in procs.items()}
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        outputs = {n: p.communicate(timeout=60)[0] for n, p in procs.items()}
        served.close()

    peaks = {n: json.loads(out.strip().splitlines()[-1])["peak_rss_kib"] for n, out in outputs.items()}
    print(f"hostile corpus: {len(CASES)} cases, first wave {wave1_s:.1f} s, peak RSS (MiB): "
          + ", ".join(f"{n} {kib / 1024:.0f}" for n, kib in peaks.items()))
    assert alive == {"fetcher": True, "parser": True}, "a consumer crashed"
    assert all(p.returncode == 0 for p in procs.values()), {n: p.returncode for n, p in procs.items()}
    assert len(first) == len(CASES), f"{len(first)} of {len(CASES)} results within {RESULTS_WITHIN_S:.0f} s"

    by_url = {r.url: r for r in results}
    wrong: list[str] = []
    for c in CASES:
        res = by_url.get(_request(web.url(c, zone), hosts[c.name]).url)
        if res is None:
            wrong.append(f"{c.name}: no result")
            continue
        if res.outcome != c.outcome:
            wrong.append(f"{c.name}: {res.outcome} ({(res.error or '')[:100]}), want {c.outcome}")
            continue
        if c.truncated is not None and res.truncated is not c.truncated:
            wrong.append(f"{c.name}: truncated={res.truncated}")
        if c.then is not None:
            second = by_url.get(web.url(c, zone, c.then[0]))
            if second is None or second.outcome != c.then[1]:
                wrong.append(f"{c.name}: then {second.outcome if second else None}, want {c.then[1]}")
        if c.parsed is not None:
            page = parsed.get(res.url)
            wrong.extend(f"{c.name}: {b}" for b in (["not parsed"] if page is None else _check_parsed(c, page, zone)))
    assert not wrong, "\n".join(wrong)
    for name, kib in peaks.items():
        assert 0 < kib < RSS_BOUND_KIB, f"{name} peak RSS {kib / 1024:.0f} MiB over {RSS_BOUND_KIB // 1024} MiB"
