"""The client's session bounds, in a light module so ``--help`` shows them without loading the SDK
(the data plane's bounds are ``transfer/limits.py``)."""

#: Seconds the client waits for any one answer of the server: a session's next message (the
#: server's keep-alives reset it) or a REST answer. Bounds a server that stopped answering.
DEFAULT_ANSWER_TIMEOUT = 120.0
#: Seconds between the keep-alives (Progress) the client sends while objects move, so that the
#: server and any proxy in between (nginx ``proxy_read_timeout``) see a live session.
DEFAULT_KEEPALIVE_INTERVAL = 5.0
#: ``pull --follow``: sessions that drop in a row (server restarted, network cut, session timeout)
#: before following gives up; each is resumed with a normal pull after a backoff from 1 s, doubling,
#: at most 30 s apart. An update received resets the count.
DEFAULT_FOLLOW_RECONNECT_ATTEMPTS = 10
