"""The Delta Sharing profile file a user hands to a client: the server's sharing endpoint, a bearer
token of the tokens file, and the token's expiry when it has one (``token profile --expires``; a token
without one never expires, and the field is left out)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import orjson

from smart_transfer.server.delta_sharing import PREFIX

#: The profile format's version (``shareCredentialsVersion``) this server writes.
SHARE_CREDENTIALS_VERSION = 1


def sharing_endpoint(server_url: str) -> str:
    """The endpoint of a server reached at ``server_url`` (http(s)://HOST[:PORT][/path])."""
    parts = urlsplit(server_url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError(f"not a server URL: {server_url!r} (e.g. https://data.example.com)")
    return server_url.rstrip("/") + PREFIX


def sharing_profile(server_url: str, token: str, expiration_time: str | None = None) -> dict[str, Any]:
    """The profile's JSON object."""
    profile: dict[str, Any] = {
        "shareCredentialsVersion": SHARE_CREDENTIALS_VERSION,
        "endpoint": sharing_endpoint(server_url),
        "bearerToken": token,
    }
    if expiration_time is not None:
        profile["expirationTime"] = expiration_time
    return profile


def profile_bytes(profile: dict[str, Any]) -> bytes:
    return orjson.dumps(profile, option=orjson.OPT_INDENT_2) + b"\n"
