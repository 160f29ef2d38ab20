"""The embedded store's URL signer: HMAC-SHA256 presigned URLs served by the server app.

A URL points at the server's ``/_store/{key}`` route. It is signed with a key kept in the store's
internal directory (so URLs survive a restart), expires, and is bound to one method, one key and, for
PUT, optionally one Content-MD5 and one part of one multipart upload. ``sigv4.py`` is the S3 twin.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, urlencode

from smart_transfer.storage.base import MAX_URL_TTL_SECONDS, PresignedRequest, check_key
from smart_transfer.storage.digest import md5_hex_from_base64
from smart_transfer.storage.errors import InvalidKey, PresigningUnavailable, PresignRefused

#: Route prefix the server app serves presigned requests under.
PRESIGN_ROUTE = "/_store/"
#: Bytes of the random signing key.
SIGNING_KEY_BYTES = 32
#: The query key of the method a URL is signed for (see ``presign``).
_METHOD = "sp"


class Grant(NamedTuple):
    """What a valid presigned request may do beyond its method and key: the MD5 (hex) its body must
    have, and the multipart upload and part number it writes."""

    md5_hex: str | None = None
    upload_id: str | None = None
    part: int | None = None


def load_signing_key(path: Path) -> bytes:
    """The signing key kept at ``path``, created (random, mode 0600) by the first caller; a racing
    second caller reads the one the first wrote."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as out:
        out.write(secrets.token_bytes(SIGNING_KEY_BYTES))
    return path.read_bytes()


class HmacSigner:
    """Signs and checks the embedded store's URLs; presigning needs ``public_url`` (the server's
    address as clients reach it), checking does not."""

    def __init__(self, signing_key: bytes, public_url: str | None) -> None:
        self._key = signing_key
        self.public_url = public_url

    def _signature(self, method: str, key: str, expires: int, md5_hex: str, part: tuple[str, int] | None) -> str:
        message = f"{method}\n{key}\n{expires}\n{md5_hex}"
        if part is not None:
            message += f"\n{part[0]}\n{part[1]}"
        return hmac.new(self._key, message.encode(), hashlib.sha256).hexdigest()

    def presign(
        self, method: str, key: str, ttl_seconds: int, content_md5: str | None, part: tuple[str, int] | None = None
    ) -> PresignedRequest:
        """A ``method`` request of ``key`` valid for ``ttl_seconds``, bound to ``content_md5`` (base64)
        and to ``part`` (upload id, part number) when given."""
        if self.public_url is None:
            raise PresigningUnavailable("this local store has no public URL to presign against")
        check_key(key)
        if not 1 <= ttl_seconds <= MAX_URL_TTL_SECONDS:
            raise ValueError(f"URL lifetime must be 1..{MAX_URL_TTL_SECONDS} seconds")
        expires = int(time.time()) + ttl_seconds
        md5_hex = md5_hex_from_base64(content_md5) if content_md5 else ""
        signature = self._signature(method, key, expires, md5_hex, part)
        # the bound method travels as ``sp`` (a SAS's "signed permissions"): a query key by which Delta
        # kernels (delta-kernel-rs, under the Delta Sharing client) know a presigned URL and fetch it over HTTP
        query = {_METHOD: method, "expires": str(expires), "signature": signature}
        if md5_hex:
            query["md5"] = md5_hex
        if part is not None:
            query.update(upload=part[0], part=str(part[1]))
        url = f"{self.public_url}{PRESIGN_ROUTE}{quote(key)}?{urlencode(query)}"
        headers = {"Content-MD5": content_md5} if content_md5 else {}
        return PresignedRequest(method, url, expires, headers)

    def verify(self, method: str, key: str, query: Mapping[str, str]) -> Grant:
        """Check a presigned request; returns what it is bound to, else raises PresignRefused."""
        try:
            check_key(key)
        except InvalidKey:
            raise PresignRefused("invalid key") from None
        signature = query.get("signature", "")
        bound_method = query.get(_METHOD, "")
        md5_hex = query.get("md5", "")
        try:
            expires = int(query.get("expires", ""))
            part = (query["upload"], int(query["part"])) if "upload" in query or "part" in query else None
        except (KeyError, ValueError):
            raise PresignRefused("missing or malformed expiry or part") from None
        expected = self._signature(bound_method, key, expires, md5_hex, part)
        if not hmac.compare_digest(expected, signature):
            raise PresignRefused("signature does not match")
        allowed = {bound_method, "HEAD"} if bound_method == "GET" else {bound_method}
        if method not in allowed:
            raise PresignRefused(f"URL was signed for {bound_method}, not {method}")
        if time.time() > expires:
            raise PresignRefused("URL expired")
        if part is None:
            return Grant(md5_hex or None)
        return Grant(md5_hex or None, part[0], part[1])
