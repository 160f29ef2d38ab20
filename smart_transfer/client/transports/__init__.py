"""How the flows reach a server: the transport contract (``base``), the smart protocol (a WebSocket session
plus presigned URLs: ``smart``, ``websocket``) and the simple one (REST: ``simple``)."""
