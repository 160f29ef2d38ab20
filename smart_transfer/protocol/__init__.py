"""The Smart Transfer Protocol, sans-I/O: messages, codec, error codes, metadata tarballs and the
pull and push transition tables. Nothing here touches sockets, storage or disk."""

#: The WebSocket subprotocol. The ODF RFC writes it ``odf/smart-transfer-protocol/v1``, but '/' is not
#: allowed in an RFC 6455 subprotocol token: browsers throw on it and the websockets library (client
#: and uvicorn's server) refuse the handshake. This spelling keeps the name and is a valid token.
SUBPROTOCOL = "odf.smart-transfer-protocol.v1"
#: Most peers one pull plan may list (the server's ``--max-peers-listed`` is at most this). Here, not in
#: ``messages``, so that ``serve --help`` can say it without loading the message models.
MAX_PEERS = 64
