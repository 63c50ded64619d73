"""`make run SEEDS=file` as a user runs it: `streamcrawl run --seeds FILE` on the real stack crawls the hosts
the file names, resolving names with the system resolver (the default with user seeds), and ends with its
summary. The web is the synthetic one, started on its own, as an outside web would be; its seeds are
named by IP address (the system resolver knows no synthetic names), so links to other hosts by name fail
DNS as they would for a host that does not exist. Judged from the web server's own request log."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from streamcrawl_synthweb.log import load_log, politeness_violations

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
HTTP_PORT, DNS_PORT, CONTROL_PORT = 18481, 18554, 18082
HOSTS, SEEDED = 6, 3


def test_run_with_a_seed_file_crawls_what_it_names(tmp_path: Path) -> None:
    log, manifest, ready = tmp_path / "requests.jsonl", tmp_path / "manifest.json", tmp_path / "ready"
    web = subprocess.Popen([sys.executable, "-m", "streamcrawl_synthweb.main", "--hosts", str(HOSTS), "--seed", "3",
                            "--profile", "polite", "--http-port", str(HTTP_PORT), "--dns-port", str(DNS_PORT),
                            "--log", str(log), "--manifest", str(manifest), "--ready-file", str(ready),
                            "--log-level", "warning"], cwd=ROOT)
    try:
        deadline = time.time() + 60
        while not ready.exists():
            assert web.poll() is None and time.time() < deadline, "the synthetic web did not start"
            time.sleep(0.2)
        ips = [h["ip"] for h in json.loads(manifest.read_text())["hosts"].values()]
        seeded, others = ips[:SEEDED], set(ips[SEEDED:])
        seeds = tmp_path / "seeds.txt"
        seeds.write_text("# my seeds\n" + "".join(f"http://{ip}:{HTTP_PORT}/\n" for ip in seeded) + "\n")
        # Loopback is refused by the SSRF guard unless allowed: the user's web is on 127.0.0.0/8 here.
        env = {**os.environ, "STREAMCRAWL_FETCHER_ALLOWED_NETWORKS": "127.0.0.0/8"}
        env.pop("STREAMCRAWL_FETCHER_DNS_SERVER", None)
        run = subprocess.run([sys.executable, "-m", "streamcrawl_cli", "run", "--seeds", str(seeds),
                              "--exit-when-idle", "6", "--workdir", str(tmp_path / "run"),
                              "--control-port", str(CONTROL_PORT), "--plain"],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=420)
    finally:
        web.terminate()
        web.wait(30)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "3 seeds produced" in out and "crawl is idle" in out, out[-3000:]
    entries = [e for e in load_log(log) if "streamcrawl" in e.ua.lower()]
    by_ip = Counter(e.ip for e in entries)
    assert set(by_ip) == set(seeded), f"requests reached {sorted(by_ip)}; seeded {seeded}"
    for ip in seeded:
        paths = {e.path for e in entries if e.ip == ip}
        assert "/robots.txt" in paths and "/" in paths, (ip, sorted(paths))
        pages = {p for p in paths if p.startswith("/p/")}
        assert len(pages) >= 3, f"{ip}: followed only {sorted(pages)}"  # relative links, on the seeded host
    assert not others & set(by_ip)
    assert politeness_violations(entries) == []
    # The summary says what was crawled (as the server saw it) and where the pages are.
    m = re.search(r"pages fetched\s+([\d,]+)\s+published to page_fetched: ([\d,]+)", out)
    assert m, out[-2000:]
    served = sum(1 for e in entries if e.status == 200 and (e.path == "/" or e.path.startswith("/p/")))
    assert int(m.group(1).replace(",", "")) == served
    assert int(m.group(2).replace(",", "")) > 0
    assert "s3://" in out and "consume         topic page_fetched" in out
