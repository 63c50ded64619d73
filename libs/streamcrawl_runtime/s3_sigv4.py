"""The headers of one S3 PUT of an in-memory object, as the minio client builds them for `put_object`
(path-style URL, the payload's SHA-256 over http and UNSIGNED-PAYLOAD with Content-MD5 over https), signed
by minio's own SigV4 signer (every header but Authorization and User-Agent). The async S3 path
(streamcrawl_runtime.s3_async) sends what this builds."""

from __future__ import annotations

import base64
import hashlib
from datetime import UTC, datetime
from urllib.parse import quote, urlsplit

from minio.credentials.credentials import Credentials
from minio.helpers import DictType
from minio.signer import sign_v4_s3


class PutSigner:
    def __init__(self, host: str, access_key: str, secret_key: str, region: str, secure: bool) -> None:
        """`host` as it goes in the Host header (host[:port], the port left out when it is the scheme's)."""
        self.host = host
        self.credentials = Credentials(access_key, secret_key)
        self.region = region
        self.secure = secure
        self._base = ("https://" if secure else "http://") + host

    def put_headers(self, bucket: str, key: str, data: bytes, headers: dict[str, str],
                    now: float | None = None) -> tuple[str, dict[str, str]]:
        """The request path and the full, signed header set of a PUT of `data` with the extra `headers`
        (Content-Type, x-amz-meta-*): what minio's put_object sends, User-Agent aside."""
        path = "/" + quote(bucket, safe="") + "/" + quote(key, safe="/~")
        out: DictType = dict(headers)
        out["Host"] = self.host
        if data:
            out["Content-Length"] = str(len(data))
        if self.secure:
            payload = "UNSIGNED-PAYLOAD"
            out["Content-MD5"] = base64.b64encode(hashlib.md5(data).digest()).decode()
        else:
            payload = hashlib.sha256(data).hexdigest()
        out["x-amz-content-sha256"] = payload
        # minio's signer reads the date from here, not from a header: whole seconds, as x-amz-date has them
        date = datetime.fromtimestamp(int(datetime.now(UTC).timestamp() if now is None else now), UTC)
        out["x-amz-date"] = date.strftime("%Y%m%dT%H%M%SZ")
        signed = sign_v4_s3(method="PUT", url=urlsplit(self._base + path), region=self.region, headers=out,
                            credentials=self.credentials, content_sha256=payload, date=date)
        return path, {k: str(v) for k, v in signed.items()}
