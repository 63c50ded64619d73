"""``streamcrawl-synthweb``: run the synthetic web's DNS and HTTP servers until SIGTERM/SIGINT.

    streamcrawl-synthweb --hosts 200 --seed 7 --http-port 8480 --dns-port 8553 \\
        --log requests.jsonl --manifest manifest.json --ready-file /tmp/synthweb.ready

The manifest (JSON) is written before the ready file, so a script that waits for the ready file can
read the manifest at once. Diagnostics go to stderr as one JSON object per line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from streamcrawl_synthweb.dns import SynthDNS
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import RequestLog
from streamcrawl_synthweb.model import DEFAULT_DNS_PORT, DEFAULT_HTTP_PORT, PROFILES, SynthWeb
from streamcrawl_synthweb.server import SynthServer

__all__ = ["build_manifest", "main", "run"]

log = logging.getLogger("streamcrawl_synthweb")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(getattr(record, "fields", {}))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str)


def _setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def build_manifest(web: SynthWeb, dns: SynthDNS, start_time: float, log_path: str | None) -> dict[str, Any]:
    return {
        "seed": web.seed,
        "n_hosts": len(web.hosts),
        "profile": dataclasses.asdict(web.profile),
        "http_port": web.port,
        "dns": {"host": dns.host, "port": dns.port, "ttl": dns.ttl, "negative_ttl": dns.negative_ttl},
        "start_time": start_time,
        "request_log": log_path,
        "hosts": {h.name: {"ip": h.ip, "kind": h.kind} for h in web.hosts},
        "seeds": web.seeds(),
    }


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="streamcrawl-synthweb", description=__doc__.splitlines()[0])
    p.add_argument("--hosts", type=int, default=200, help="number of synthetic hosts")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--profile", choices=sorted(PROFILES), default="default")
    p.add_argument("--http-port", type=int, default=DEFAULT_HTTP_PORT)
    p.add_argument("--dns-host", default="127.0.0.1", help="loopback address for the DNS server")
    p.add_argument("--dns-port", type=int, default=DEFAULT_DNS_PORT)
    p.add_argument("--dns-ttl", type=int, default=300)
    p.add_argument("--dns-negative-ttl", type=int, default=60)
    p.add_argument("--robots-timeout", type=float, help="seconds the robots_timeout hosts hang")
    p.add_argument("--change-period", type=float, help="seconds between content versions")
    p.add_argument("--crawl-delay", type=float, help="Crawl-delay announced by robots_crawl_delay hosts")
    p.add_argument("--log", help="request log (JSON lines); omitted = no request log")
    p.add_argument("--manifest", help="write the manifest JSON here")
    p.add_argument("--ready-file", help="create this file once both servers listen")
    p.add_argument("--log-level", default="info")
    p.add_argument("--nice", type=int, default=-10,
                   help="change this process's scheduling priority by this much (negative = favoured; 0 = leave)")
    return p.parse_args(argv)


def _favour(increment: int, autogroup: Path = Path("/proc/self/autogroup")) -> None:
    """Raise (or lower) this process's CPU priority, best effort.

    Why: politeness is judged from this server's own log. The synthetic web stands in for remote
    servers running on their own machines, but here it shares two cores with the crawler under test;
    when the crawler loads them, the kernel can hold this process back for tens of milliseconds
    between writing a response and stamping its end, and the log would then show gaps the network
    never saw. Favouring it keeps its clock readings close to what happened on the wire.

    With autogroup scheduling (Linux's default for desktop and many server kernels) a nice value only
    ranks a process against others of its own session, and the launcher starts every service, engine
    and this server in a session of its own: ``os.nice`` alone then changed nothing against them. The
    session's autogroup is favoured too, but only when this process leads its session, so the nice
    value never leaks to a shell that started the server in the foreground.
    """
    if increment == 0:
        return
    try:
        os.nice(increment)
    except OSError as exc:  # not permitted (no CAP_SYS_NICE): run at the normal priority
        log.warning("priority unchanged", extra={"fields": {"nice": increment, "error": str(exc)}})
    if os.getsid(0) != os.getpid() or not autogroup.exists():
        return
    try:
        autogroup.write_text(f"{max(-20, min(19, increment))}\n")
    except OSError as exc:
        log.warning("autogroup priority unchanged", extra={"fields": {"nice": increment, "error": str(exc)}})


def freeze_heap() -> None:
    """Move everything allocated so far (the generated web) out of the garbage collector's reach.

    Why: the generated web is a large graph of long-lived objects, and every full collection walks
    all of it: 50-70 ms for 200 hosts and ~340 ms for 2,000 (bench/synthweb_gc.py, docs/benchmarks-gc.md).
    Such a pause between writing a response and stamping its end made the request log show an
    exchange 60 ms longer, and a gap 60 ms shorter, than the crawler saw on the wire (a CI run
    failed on it; the 10x rule multiplies the longer exchange). Frozen, a collection only walks
    the objects that requests allocate afterwards.
    """
    gc.collect()
    gc.freeze()


async def run(args: argparse.Namespace, stop: asyncio.Event | None = None) -> None:
    """Start DNS + HTTP, write manifest and ready file, serve until ``stop`` or SIGTERM/SIGINT."""
    profile = PROFILES[args.profile]
    overrides = {
        "robots_timeout_s": args.robots_timeout,
        "change_period_s": args.change_period,
        "crawl_delay_s": args.crawl_delay,
    }
    profile = dataclasses.replace(profile, **{k: v for k, v in overrides.items() if v is not None})
    t0 = time.monotonic()
    web = generate(args.hosts, args.seed, profile, port=args.http_port)
    freeze_heap()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    dns = SynthDNS(web, args.dns_host, args.dns_port, args.dns_ttl, args.dns_negative_ttl)
    http = SynthServer(web, RequestLog(args.log))
    await dns.start()
    try:
        await http.start()
        try:
            if args.manifest:
                manifest = build_manifest(web, dns, http.start_time, args.log)
                _write_atomic(Path(args.manifest), json.dumps(manifest, indent=1))
            if args.ready_file:
                _write_atomic(Path(args.ready_file), f"{os.getpid()}\n")
            log.info(
                "ready",
                extra={"fields": {"hosts": len(web.hosts), "startup_s": round(time.monotonic() - t0, 3)}},
            )
            await stop.wait()
            log.info("stopping", extra={"fields": {"requests": http.log.entries_written}})
        finally:
            await http.stop()
    finally:
        await dns.stop()
        if args.ready_file:
            with contextlib.suppress(FileNotFoundError):
                Path(args.ready_file).unlink()


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    _setup_logging(args.log_level)
    if args.hosts < 1:
        log.error("need at least one host")
        return 2
    _favour(args.nice)
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
