"""The Smart Transfer Protocol, sans-I/O: messages, codec, error codes, metadata tarballs and the
pull and push transition tables. Nothing here touches sockets, storage or disk."""

SUBPROTOCOL = "odf/smart-transfer-protocol/v1"
