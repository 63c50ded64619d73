"""The metrics scraper: plain targets, and `dns+` targets expanded to every address their name resolves to
(how the control plane sums every replica behind a headless Service). Real HTTP servers on two loopback
addresses; the resolver is the only stand-in (no cluster DNS here)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from streamcrawl_runtime.metrics_scrape import Scraper, expand, system_resolver

PAGES = ("streamcrawl_pages_total", ())


def _server(addr: str, port: int, pages: int) -> ThreadingHTTPServer:
    body = f"# TYPE streamcrawl_pages counter\nstreamcrawl_pages_total {pages}\n".encode()

    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer((addr, port), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def two_pods() -> Iterator[int]:
    """Two "replicas" on one port, at 127.0.0.1 (3 pages) and 127.0.0.2 (4 pages)."""
    a = _server("127.0.0.1", 0, 3)
    port = a.server_address[1]
    try:
        b = _server("127.0.0.2", port, 4)
    except OSError:
        a.shutdown()
        a.server_close()
        pytest.skip("127.0.0.2 is not bindable here")
    yield port
    for s in (a, b):
        s.shutdown()
        s.server_close()


def test_a_plain_target_is_itself() -> None:
    def never(name: str, port: int) -> list[str]:
        raise AssertionError("resolved a plain target")

    assert expand("http://127.0.0.1:9101/metrics", never) == ["http://127.0.0.1:9101/metrics"]


def test_a_dns_target_becomes_one_url_per_address_in_a_stable_order() -> None:
    asked: list[tuple[str, int]] = []

    def resolve(name: str, port: int) -> list[str]:
        asked.append((name, port))
        return ["10.0.0.9", "fd00::1", "10.0.0.10"]

    got = expand("dns+http://frontier.crawl.svc:9101/metrics", resolve)
    assert asked == [("frontier.crawl.svc", 9101)]
    assert got == ["http://10.0.0.9:9101/metrics", "http://10.0.0.10:9101/metrics", "http://[fd00::1]:9101/metrics"]


def test_a_dns_target_must_be_http() -> None:
    with pytest.raises(ValueError, match="dns\\+http"):
        expand("dns+ftp://x:1/metrics", lambda n, p: ["127.0.0.1"])


def test_the_system_resolver_answers_for_localhost() -> None:
    assert "127.0.0.1" in system_resolver("localhost", 80) or "::1" in system_resolver("localhost", 80)


def test_every_replica_behind_a_name_is_summed_and_followed_as_it_scales(two_pods: int) -> None:
    port = two_pods
    answer = ["127.0.0.1", "127.0.0.2"]
    scraper = Scraper([f"dns+http://frontier.test:{port}/metrics"], resolve=lambda n, p: list(answer))
    try:
        both = scraper.scrape()
        assert both.sample[PAGES] == 7.0
        assert both.targets == {f"http://127.0.0.1:{port}/metrics": "ok", f"http://127.0.0.2:{port}/metrics": "ok"}
        answer.pop()  # scale-in: the name answers with one pod, the next scrape follows without a restart
        one = scraper.scrape()
        assert one.sample[PAGES] == 3.0 and list(one.targets) == [f"http://127.0.0.1:{port}/metrics"]
    finally:
        scraper.close()


def test_a_name_that_does_not_resolve_or_has_no_pod_is_reported_not_fatal(two_pods: int) -> None:
    port = two_pods

    def nxdomain(name: str, port: int) -> list[str]:
        raise OSError(f"[Errno -2] Name or service not known: {name}")

    plain = f"http://127.0.0.1:{port}/metrics"
    for resolve, why in ((nxdomain, "unresolvable"), (lambda n, p: [], "no addresses")):
        scraper = Scraper(["dns+http://gone.test:9101/metrics", plain], resolve=resolve)
        try:
            s = scraper.scrape()
        finally:
            scraper.close()
        assert s.targets[plain] == "ok" and s.sample[PAGES] == 3.0
        assert s.targets["dns+http://gone.test:9101/metrics"].startswith(why)
