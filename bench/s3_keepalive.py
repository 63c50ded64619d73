"""S3 requests with and without connection reuse: versitygw as `make stack-up` used to start it (every
answer "Connection: close": each request a new TCP connection) against versitygw --keep-alive, side by side.

    .venv/bin/python bench/s3_keepalive.py --requests 300 --repeats 5 --out /tmp/s3-keepalive.md

Starts two versitygw processes of its own (the stack's binary, .stack/bin/versitygw; `make stack-up`
builds it) on loopback ports 19901 and 19902 over empty temporary directories, so the stack's store is
not touched. Each repeat runs, for each server in turn, the same ``--requests`` 3 KB PUTs through the two
clients the services use: minio (the WARC writer's and parser's client, one request at a time in a worker
thread, as they call it) and AsyncS3Put (the fetcher's aiohttp client, 10 at a time). Reported: the
client's CPU and the server's CPU per request (``/proc/<pid>/stat``), medians over the repeats, and the
new TCP connections the server accepted (its TIME-WAIT sockets after the run).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import crawl_cpu as cpu
from minio import Minio
from streamcrawl_runtime.s3_async import AsyncS3Put

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / ".stack" / "bin" / "versitygw"
ACCESS, SECRET, BUCKET = "bench", "bench-secret-key", "bench-keepalive"
SIDES = {"Connection: close (versitygw's default)": (19901, []),
         "--keep-alive": (19902, ["--keep-alive"])}
DATA = b"x" * 3000


def cpu_s(pid: int) -> float:
    got = cpu.cpu_seconds(pid, children=False)
    if got is None:
        raise SystemExit(f"versitygw {pid} is gone")
    return got


def start(port: int, flags: list[str], where: Path) -> subprocess.Popen[bytes]:
    (where / "meta").mkdir(parents=True)
    (where / "root").mkdir(parents=True)
    proc = subprocess.Popen([str(BINARY), "--access", ACCESS, "--secret", SECRET, "--port", f"127.0.0.1:{port}",
                             "--quiet", *flags, "posix", "--sidecar", str(where / "meta"), str(where / "root")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = Minio(f"127.0.0.1:{port}", ACCESS, SECRET, secure=False, region="us-east-1")
    for _ in range(100):
        try:
            client.make_bucket(BUCKET)
            return proc
        except Exception:
            time.sleep(0.1)
    raise SystemExit(f"versitygw on {port} did not answer")


def minio_run(port: int, n: int) -> None:
    client = Minio(f"127.0.0.1:{port}", ACCESS, SECRET, secure=False, region="us-east-1")
    for i in range(n):
        client.put_object(BUCKET, f"m{i}", io.BytesIO(DATA), len(DATA))


def aiohttp_run(port: int, n: int) -> None:
    async def go() -> None:
        put = AsyncS3Put(f"127.0.0.1:{port}", ACCESS, SECRET, "us-east-1", False)
        try:
            for i in range(0, n, 10):
                await asyncio.gather(*(put.put(BUCKET, f"a{i + j}", DATA, {"Content-Type": "text/html"})
                                       for j in range(10)))
        finally:
            await put.aclose()
    asyncio.run(go())


def time_waits(port: int) -> int:
    out = subprocess.run(["ss", "-Htan", "state", "time-wait", "sport", f"= :{port}"], capture_output=True,
                         text=True).stdout
    return len([line for line in out.splitlines() if line.strip()])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    if not BINARY.exists():
        raise SystemExit(f"{BINARY} missing: run make stack-up first")
    tmp = Path(tempfile.mkdtemp(prefix="s3-keepalive-"))
    procs = {name: start(port, flags, tmp / str(port)) for name, (port, flags) in SIDES.items()}
    clients = {"minio (WARC writer, parser)": minio_run, "AsyncS3Put, aiohttp (fetcher)": aiohttp_run}
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    conns: dict[str, int] = {}
    try:
        for _ in range(args.repeats):
            for cname, run in clients.items():
                for name, (port, _flags) in SIDES.items():  # alternated, so drift hits both sides alike
                    pid = procs[name].pid
                    s0, c0 = cpu_s(pid), time.process_time()
                    run(port, args.requests)
                    got.setdefault((cname, name), []).append(
                        ((time.process_time() - c0) / args.requests * 1e6, (cpu_s(pid) - s0) / args.requests * 1e6))
        for name, (port, _flags) in SIDES.items():
            conns[name] = time_waits(port)
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    total = args.requests * args.repeats * len(clients)
    lines = [f"Command: `.venv/bin/python bench/s3_keepalive.py --requests {args.requests} --repeats {args.repeats}`"
             f" ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores). 3 KB PUTs;"
             " medians over the repeats, the two servers alternated.", "",
             "| client | server | client CPU, µs per PUT | server CPU, µs per PUT |", "|---|---|---|---|"]
    for (cname, name), rows in got.items():
        lines.append(f"| {cname} | {name} | {statistics.median(r[0] for r in rows):.0f} |"
                     f" {statistics.median(r[1] for r in rows):.0f} |")
    close, keep = SIDES

    def med(cname: str, side: str, k: int) -> float:
        return statistics.median(r[k] for r in got[(cname, side)])

    ratios = [f"{c} {med(c, keep, 0) / med(c, close, 0):.2f}× / {med(c, keep, 1) / med(c, close, 1):.2f}×"
              for c in clients]
    lines += ["", "Ratios (keep-alive ÷ close), client / server CPU per PUT: " + ", ".join(ratios) + ".", "",
              f"Connections the server closed (its TIME-WAIT sockets at the end, out of {total:,} requests each): "
              + ", ".join(f"{name} {n:,}" for name, n in conns.items()) + "."]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
