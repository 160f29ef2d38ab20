"""What every route and session of one server shares."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from smart_transfer.repo import Repository
from smart_transfer.server.auth import Authorizer
from smart_transfer.server.limits import ConcurrencyLimit
from smart_transfer.server.settings import ServerSettings


class ServerState:
    """Settings, the repository (and through it the store) and the URL clients reach us at."""

    def __init__(self, settings: ServerSettings, repository: Repository, base_url: str) -> None:
        self.settings = settings
        self.repository = repository
        self.base_url = base_url
        self.authorizer = Authorizer.from_file(settings.tokens_file) if settings.tokens_file else Authorizer()
        self.sessions = ConcurrencyLimit(
            "sessions", settings.max_sessions, settings.max_sessions_per_token, settings.busy_retry_after_seconds
        )
        self.requests = ConcurrencyLimit(
            "requests", settings.max_requests, settings.max_requests_per_token, settings.busy_retry_after_seconds
        )
        #: Object bytes this process itself read or wrote for clients (embedded-store routes and,
        #: later, streamed REST reads). The smart path on S3 must leave it at zero.
        self.object_bytes_through_server = 0

    def temp_path(self) -> Path:
        """A fresh temporary file path on the server's disk (for bodies checked before storing)."""
        directory = self.settings.root / "tmp"
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{os.getpid()}-{secrets.token_hex(8)}"

    def count_object_bytes(self, count: int) -> None:
        self.object_bytes_through_server += count
