"""A fast SigV4 query-string presigner for S3 GET and PUT URLs.

boto3 builds a request object, runs its event system and re-derives the signing key for every URL
(~0.2-0.5 ms each). Here the signing key is cached per (day, region), the canonical request is one
format string, and each URL costs one SHA-256 and one HMAC. The output is exactly botocore's URL for
the same inputs (proven by a hypothesis test) and is accepted by real S3 servers.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from typing import NamedTuple
from urllib.parse import quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
_UNSIGNED = "UNSIGNED-PAYLOAD"


class Credentials(NamedTuple):
    """The AWS credentials a URL is signed with (``token``: a session token, when they are temporary)."""

    access_key: str
    secret_key: str
    token: str | None = None


def _uri_encode(value: str) -> str:
    return quote(value, safe="-_.~")


class QueryPresigner:
    """Presigns path-style S3 URLs for one endpoint, bucket and region."""

    def __init__(self, endpoint_url: str, bucket: str, region: str, service: str = "s3") -> None:
        parts = urlsplit(endpoint_url)
        default_port = {"http": 80, "https": 443}[parts.scheme]
        self._host = parts.hostname or ""
        if parts.port is not None and parts.port != default_port:
            self._host = f"{self._host}:{parts.port}"
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._bucket_path = "/" + quote(bucket, safe="/~")
        self._region = region
        self._service = service
        self._keys: dict[tuple[str, str], bytes] = {}

    def _signing_key(self, secret: str, day: str) -> bytes:
        cached = self._keys.get((secret, day))
        if cached is None:
            key = hmac.new(("AWS4" + secret).encode(), day.encode(), hashlib.sha256).digest()
            for part in (self._region, self._service, "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day): key}  # one day's key is all a presigner needs
            cached = key
        return cached

    def presign(
        self,
        method: str,
        key: str,
        expires_in: int,
        credentials: Credentials,
        content_md5: str | None = None,
        now: float | None = None,
        query: Sequence[tuple[str, str]] = (),
        headers: Mapping[str, str] | None = None,
    ) -> str:
        """The presigned URL of ``method`` on ``key`` (already including any bucket prefix); ``query``:
        the operation's own parameters, in botocore's order (``uploadId``, ``partNumber`` of an
        UploadPart), signed with the rest. ``content_md5`` and ``headers`` (more headers, such as
        ``x-amz-server-side-encryption``) are signed too: the request must then carry them, as given."""
        moment = time.gmtime(time.time() if now is None else now)
        timestamp = time.strftime("%Y%m%dT%H%M%SZ", moment)
        day = timestamp[:8]
        scope = f"{day}/{self._region}/{self._service}/aws4_request"
        path = f"{self._bucket_path}/{quote(key, safe='/~')}"
        signed = {name.lower(): value.strip() for name, value in (headers or {}).items()}
        if content_md5 is not None:
            signed["content-md5"] = content_md5
        signed["host"] = self._host
        names = sorted(signed)
        signed_headers = ";".join(names)
        params = [(name, _uri_encode(value)) for name, value in query]
        params += [
            ("X-Amz-Algorithm", ALGORITHM),
            ("X-Amz-Credential", _uri_encode(f"{credentials.access_key}/{scope}")),
            ("X-Amz-Date", timestamp),
            ("X-Amz-Expires", str(expires_in)),
            ("X-Amz-SignedHeaders", _uri_encode(signed_headers)),
        ]
        if credentials.token is not None:
            params.append(("X-Amz-Security-Token", _uri_encode(credentials.token)))
        # signed over the sorted parameters; the URL keeps botocore's order (token last)
        signed_query = "&".join(f"{k}={v}" for k, v in sorted(params))
        url_query = "&".join(f"{k}={v}" for k, v in params)
        canonical_headers = "".join(f"{name}:{signed[name]}\n" for name in names)
        canonical = f"{method}\n{path}\n{signed_query}\n{canonical_headers}\n{signed_headers}\n{_UNSIGNED}"
        to_sign = f"{ALGORITHM}\n{timestamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.new(
            self._signing_key(credentials.secret_key, day), to_sign.encode(), hashlib.sha256
        ).hexdigest()
        return f"{self._origin}{path}?{url_query}&X-Amz-Signature={signature}"
