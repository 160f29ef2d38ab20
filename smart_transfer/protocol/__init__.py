"""The Smart Transfer Protocol, sans-I/O: messages, codec, error codes, metadata tarballs and the
pull and push transition tables. Nothing here touches sockets, storage or disk."""

import re

#: The WebSocket subprotocol. The ODF RFC writes it ``odf/smart-transfer-protocol/v1``, but '/' is not
#: allowed in an RFC 6455 subprotocol token: browsers throw on it and the websockets library (client
#: and uvicorn's server) refuse the handshake. This spelling keeps the name and is a valid token.
SUBPROTOCOL = "odf.smart-transfer-protocol.v1"
#: Most peers one pull plan may list (the server's ``--max-peers-listed`` is at most this). Here, not in
#: ``messages``, so that ``serve --help`` can say it without loading the message models.
MAX_PEERS = 64
#: Objects one URL negotiation page names by default: the server's ``--max-objects-per-page``, the
#: client's ``--page-size``, and the pages of the simple protocol.
DEFAULT_OBJECTS_PER_PAGE = 1000


#: What a bearer token may be (RFC 6750's b64token): what the server's tokens are made of, and nothing that
#: could end or split a header line.
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~+/-]+=*")


class InvalidToken(ValueError):
    """A token that cannot be a bearer token; it is never sent."""


def check_token(token: str | None) -> None:
    """Refuse a token no server could have issued (control characters, spaces, non-ASCII), before any
    request carries it: a malformed credential fails closed, with one clear line. An empty one is no
    token (``SMART_TRANSFER_TOKEN=`` in a CI job whose secret is unset): requests go without one."""
    if token and TOKEN_PATTERN.fullmatch(token) is None:
        raise InvalidToken(
            f"invalid token ({len(token)} characters): a bearer token is letters, digits and - . _ ~ + / "
            "(then = padding), with no spaces or control characters"
        )


def authorization(token: str | None) -> dict[str, str]:
    """The request headers that carry a bearer token (none without one): every client request's."""
    check_token(token)
    return {"Authorization": f"Bearer {token}"} if token else {}


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; None when absent or of another scheme."""
    if not header or not header.lower().startswith("bearer "):
        return None
    return header[7:].strip() or None
