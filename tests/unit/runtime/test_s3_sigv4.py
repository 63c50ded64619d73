"""The async S3 path's PUT is the request minio sends: the same headers, signed by minio's own signer to
the same Authorization (over http with the payload's SHA-256, over https UNSIGNED-PAYLOAD with
Content-MD5), and the Host header minio puts for an endpoint."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest
from minio.credentials import Credentials
from minio.signer import sign_v4_s3
from streamcrawl_runtime.s3_async import host_header
from streamcrawl_runtime.s3_sigv4 import PutSigner

NOW = datetime(2026, 12, 2, 14, 31, 7, tzinfo=UTC)
DATA = b"\x1f\x8b" + bytes(range(256)) * 7


def _minio_auth(path: str, headers: dict[str, str], secure: bool, host: str) -> str:
    """minio's own signature of the same request (its put_object passes these headers to sign_v4_s3)."""
    scheme = "https" if secure else "http"
    unsigned = {k: v for k, v in headers.items() if k != "Authorization"}
    signed = sign_v4_s3(method="PUT", url=urlsplit(f"{scheme}://{host}{path}"), region="eu-west-3",
                        headers=unsigned, credentials=Credentials("AKID", "s3cr3t/key"),
                        content_sha256=unsigned["x-amz-content-sha256"], date=NOW)
    return str(signed["Authorization"])


@pytest.mark.parametrize("secure", [False, True])
def test_put_headers_are_signed_as_minio_signs_them(secure: bool) -> None:
    signer = PutSigner("127.0.0.1:19000", "AKID", "s3cr3t/key", "eu-west-3", secure)
    digest = hashlib.sha256(b"body").hexdigest()
    path, headers = signer.put_headers("pages-bucket", f"pages/{digest[:2]}/{digest}.gz", DATA,
                                       {"Content-Type": "application/gzip", "x-amz-meta-sha256": digest},
                                       now=NOW.timestamp())
    assert path == f"/pages-bucket/pages/{digest[:2]}/{digest}.gz"
    assert headers["Host"] == "127.0.0.1:19000" and headers["Content-Length"] == str(len(DATA))
    assert headers["x-amz-date"] == "20261202T143107Z"
    if secure:
        assert headers["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
        assert headers["Content-MD5"] == base64.b64encode(hashlib.md5(DATA).digest()).decode()
    else:
        assert headers["x-amz-content-sha256"] == hashlib.sha256(DATA).hexdigest()
        assert "Content-MD5" not in headers
    assert headers["Authorization"] == _minio_auth(path, headers, secure, "127.0.0.1:19000")
    md5 = "content-md5;" if secure else ""
    assert f"SignedHeaders=content-length;{md5}content-type;host;x-amz-content-sha256;x-amz-date;x-amz-meta-sha256" \
        in headers["Authorization"]


def test_the_signing_key_follows_the_utc_day() -> None:
    signer = PutSigner("s3.local", "AKID", "s3cr3t/key", "eu-west-3", False)
    later = NOW.replace(day=3)
    for when in (NOW, later, NOW):
        path, headers = signer.put_headers("b", "k/one two~.gz", DATA, {}, now=when.timestamp())
        assert path == "/b/k/one%20two~.gz"
        unsigned = {k: v for k, v in headers.items() if k != "Authorization"}
        expected = sign_v4_s3(method="PUT", url=urlsplit(f"http://s3.local{path}"), region="eu-west-3",
                              headers=unsigned, credentials=Credentials("AKID", "s3cr3t/key"),
                              content_sha256=unsigned["x-amz-content-sha256"], date=when)
        assert headers["Authorization"] == expected["Authorization"]


@pytest.mark.parametrize(("endpoint", "secure", "host"), [
    ("127.0.0.1:19000", False, "127.0.0.1:19000"), ("s3.local:80", False, "s3.local"),
    ("s3.local:443", True, "s3.local"), ("s3.local:443", False, "s3.local:443"), ("s3.local", True, "s3.local"),
    ("[::1]:9000", False, "[::1]:9000"), ("[::1]:80", False, "[::1]"),
])
def test_host_header_leaves_out_the_default_port(endpoint: str, secure: bool, host: str) -> None:
    assert host_header(endpoint, secure) == host
