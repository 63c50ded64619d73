"""AWS Signature Version 4 for one S3 PUT of an object: the headers the minio client sends for
`put_object` of an in-memory body, signed the way it signs them (every header but Authorization and
User-Agent, path-style URL, the payload's SHA-256 over http and UNSIGNED-PAYLOAD with Content-MD5 over
https). Driver-free: the async S3 path (streamcrawl_runtime.s3_async) sends what this builds. The
signing key is derived once per UTC day."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import time
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
_SPACES = re.compile(" +")


class PutSigner:
    def __init__(self, host: str, access_key: str, secret_key: str, region: str, secure: bool) -> None:
        """`host` as it goes in the Host header (host[:port], the port left out when it is the scheme's)."""
        self.host = host
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region
        self.secure = secure
        self._day = ""
        self._key = b""

    def _signing_key(self, day: str) -> bytes:
        if day != self._day:
            k = hmac.digest(("AWS4" + self.secret_key).encode(), day.encode(), "sha256")
            k = hmac.digest(k, self.region.encode(), "sha256")
            k = hmac.digest(k, b"s3", "sha256")
            self._key = hmac.digest(k, b"aws4_request", "sha256")
            self._day = day
        return self._key

    def put_headers(self, bucket: str, key: str, data: bytes, headers: dict[str, str],
                    now: float | None = None) -> tuple[str, dict[str, str]]:
        """The request path and the full, signed header set of a PUT of `data` with the extra `headers`
        (Content-Type, x-amz-meta-*): what minio's put_object sends, User-Agent aside."""
        path = "/" + quote(bucket, safe="") + "/" + quote(key, safe="/~")
        out = dict(headers)
        out["Host"] = self.host
        if data:
            out["Content-Length"] = str(len(data))
        if self.secure:
            payload = "UNSIGNED-PAYLOAD"
            out["Content-MD5"] = base64.b64encode(hashlib.md5(data).digest()).decode()
        else:
            payload = hashlib.sha256(data).hexdigest()
        out["x-amz-content-sha256"] = payload
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
        out["x-amz-date"] = stamp
        canon = sorted((k.lower(), _SPACES.sub(" ", v).strip()) for k, v in out.items())
        signed = ";".join(k for k, _ in canon)
        request = "\n".join(("PUT", path, "", "\n".join(f"{k}:{v}" for k, v in canon), "", signed, payload))
        day = stamp[:8]
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{hashlib.sha256(request.encode()).hexdigest()}"
        signature = hmac.new(self._signing_key(day), to_sign.encode(), hashlib.sha256).hexdigest()
        out["Authorization"] = (f"{ALGORITHM} Credential={self.access_key}/{scope}, "
                                f"SignedHeaders={signed}, Signature={signature}")
        return path, out
