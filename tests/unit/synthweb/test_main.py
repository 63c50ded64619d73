"""The streamcrawl-synthweb entrypoint: ready file, manifest, clean stop on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import httpx

from tests.unit.synthweb.conftest import free_port


def test_cli_starts_writes_manifest_and_stops(tmp_path):
    http_port, dns_port = free_port(), free_port()
    ready, manifest, log = tmp_path / "ready", tmp_path / "manifest.json", tmp_path / "req.jsonl"
    cmd = [
        sys.executable, "-m", "streamcrawl_synthweb.main", "--hosts", "30", "--seed", "7",
        "--profile", "fast", "--http-port", str(http_port), "--dns-port", str(dns_port),
        "--log", str(log), "--manifest", str(manifest), "--ready-file", str(ready),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while not ready.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        assert ready.exists()
        doc = json.loads(manifest.read_text())
        assert doc["http_port"] == http_port and doc["dns"]["port"] == dns_port
        assert len(doc["hosts"]) == 30 and doc["seeds"][0] == f"http://h0001.synth.test:{http_port}/"
        ip = doc["hosts"]["h0001.synth.test"]["ip"]
        assert httpx.get(f"http://{ip}:{http_port}/", headers={"Host": "h0001.synth.test"}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err
    assert not ready.exists()
    assert '"msg": "ready"' in err.decode()
    assert json.loads(log.read_text().splitlines()[0])["path"] == "/"


def test_freeze_heap_takes_the_generated_web_out_of_collections():
    # A full collection walks every tracked object; the web must not be among them once frozen, or
    # a collection pauses the server between a response and its logged end (see freeze_heap).
    import gc

    from streamcrawl_synthweb.generator import generate
    from streamcrawl_synthweb.main import freeze_heap
    from streamcrawl_synthweb.model import PROFILES

    web = generate(5, 7, PROFILES["fast"])
    host = web.hosts[0]
    assert any(o is host for o in gc.get_objects())
    try:
        freeze_heap()
        assert not any(o is host for o in gc.get_objects())
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_favour_sets_the_autogroup_only_for_a_session_leader(tmp_path, monkeypatch):
    # Every process the launcher starts leads its own session, so with autogroup scheduling a plain
    # nice value ranks the server only against itself; the autogroup's nice is what counts.
    from streamcrawl_synthweb import main as synth_main

    group = tmp_path / "autogroup"
    group.write_text("/autogroup-1 nice 0\n")
    monkeypatch.setattr(synth_main.os, "nice", lambda _inc: 0)
    monkeypatch.setattr(synth_main.os, "getsid", lambda _pid: -1)  # not a session leader: leave it
    synth_main._favour(-10, autogroup=group)
    assert group.read_text() == "/autogroup-1 nice 0\n"
    monkeypatch.setattr(synth_main.os, "getsid", lambda _pid: synth_main.os.getpid())
    synth_main._favour(-10, autogroup=group)
    assert group.read_text() == "-10\n"
    synth_main._favour(0, autogroup=group)  # 0 = leave the priority alone
    assert group.read_text() == "-10\n"
