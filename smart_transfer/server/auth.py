"""Access control: bearer tokens from a tokens file, stored hashed, each with a subject and read/write
grants on dataset-name patterns (shell-style: ``sales-*``, ``*``).

Tokens file (JSON, one object): ``{"tokens": [{"subject": "alice", "sha256": "<hex of the token's
SHA-256>", "read": ["*"], "write": ["sales-*"], "expires": "2030-01-31T12:00:00Z"}]}`` (``expires`` is
optional: from that moment on the token is refused, by :meth:`Grant.refuse_if_expired`, which every face of
the server reaches through :meth:`Authorizer.subject`). ``smart-transfer token add`` writes entries and
prints the secret once; the file never holds a usable secret. A write grant implies read. The file's
one schema is :mod:`smart_transfer.server.tokens_file`: a malformed file is refused whole, never read in part.
"""

from __future__ import annotations

import contextlib
import fcntl
import fnmatch
import hashlib
import hmac
import logging
import os
import secrets
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from smart_transfer.config.units import EXPIRY_FORMAT
from smart_transfer.errors import LocalError
from smart_transfer.protocol import bearer_token
from smart_transfer.reading.output import OutputError, open_output
from smart_transfer.server.tokens_file import TokensDocument, TokensFileError, new_entry, parse_tokens, tokens_bytes

#: Bytes of randomness in a new token (printed as 43 URL-safe characters).
TOKEN_BYTES = 32
#: What every generated token starts with.
TOKEN_PREFIX = "st_"
#: How long ``token add``/``revoke`` waits for another one changing the same tokens file.
TOKENS_LOCK_WAIT_SECONDS = 10.0
#: What every token is answered while the server's tokens file cannot be used.
TOKENS_FILE_UNUSABLE = (
    "the server's tokens file is malformed or unreadable: every token is refused until an operator fixes it"
)
log = logging.getLogger("smart_transfer.server.auth")


class Access(Enum):
    READ = "read"
    WRITE = "write"


class AuthError(Exception):
    """401 (no or unknown token) or 403 (a grant is missing)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


class TokenExpired(AuthError):
    """401: the token is known, and its expiry has passed."""

    def __init__(self, expired_at: datetime) -> None:
        self.expired_at = expired_at
        super().__init__(401, f"this token expired at {expired_at.strftime(EXPIRY_FORMAT)}")


@dataclass(frozen=True)
class Grant:
    """Who a token belongs to, which datasets it may read and write, and until when (None: no end)."""

    subject: str
    sha256: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()
    expires_at: datetime | None = None

    def refuse_if_expired(self) -> None:
        """The one expiry check (TokenExpired once the token's time has passed), for every face and for
        sessions that outlive the moment they were admitted."""
        if self.expires_at is not None and datetime.now(UTC) >= self.expires_at:
            raise TokenExpired(self.expires_at)

    def seconds_left(self) -> float | None:
        """How long the token still works (None: no end)."""
        return None if self.expires_at is None else max(0.0, (self.expires_at - datetime.now(UTC)).total_seconds())

    def allows(self, dataset: str, access: Access) -> bool:
        patterns = self.write if access is Access.WRITE else self.read + self.write
        return any(fnmatch.fnmatchcase(dataset, pattern) for pattern in patterns)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def load_grants(path: Path) -> list[Grant]:
    """The grants of a tokens file (TokensFileError when it is missing, not a regular file, or malformed)."""
    document = _read_document(path)
    return [Grant(e.subject, e.sha256, tuple(e.read), tuple(e.write), e.expires_at()) for e in document.tokens]


def check_tokens_file(path: Path) -> None:
    """Refuse (TokensFileError) a tokens file ``token add`` could not add to: one that is there but not a
    regular file or malformed. A missing one is fine (it is created; through a dangling symlink too)."""
    _regular(path)
    if path.exists():
        load_grants(path)


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What changes whenever the file does (a rename over it, or an edit in place)."""
    try:
        stat = path.stat()
    except OSError:  # gone or unreadable: the reload says which, once
        return None
    return stat.st_ino, stat.st_mtime_ns, stat.st_size


@dataclass
class Authorizer:
    """Decides access. With no grants at all, everyone is anonymous and allowed (loopback only:
    the server refuses to start otherwise unless told ``--allow-anonymous``).

    Given a tokens file, it is read again whenever it changes (one ``stat`` per check), so tokens
    added or revoked take effect on the next request or session without a restart. A file that
    becomes malformed, unreadable or disappears fails closed: every token (of the old file too) is
    refused with 401 UNAUTHORIZED saying so, and the server logs one line per change of the file,
    until it is fixed.
    """

    grants: list[Grant] = field(default_factory=list)
    anonymous: bool = True
    path: Path | None = None
    _seen: tuple[int, int, int] | None = None
    #: Why the tokens file as it is now cannot be used (None: it can).
    unusable: str | None = None

    @classmethod
    def from_file(cls, path: Path) -> Authorizer:
        seen = _signature(path)
        return cls(load_grants(path), anonymous=False, path=path, _seen=seen)

    def current(self) -> list[Grant]:
        """The grants, re-read first when the tokens file changed."""
        if self.path is not None and (seen := _signature(self.path)) != self._seen:
            self._seen = seen
            try:
                self.grants, self.unusable = load_grants(self.path), None
                log.info("tokens file %s reloaded: %d token(s)", self.path, len(self.grants))
            except TokensFileError as exc:
                self.grants, self.unusable = [], str(exc)
                log.error("%s; every token is refused until it is fixed", exc)
        return self.grants

    def subject(self, authorization: str | None) -> Grant | None:
        """The grant of the bearer token in an Authorization header (None: anonymous allowed); TokenExpired
        for a token whose time has passed."""
        if self.anonymous:
            return None
        token = bearer_token(authorization)
        if token is None:
            raise AuthError(401, "a bearer token is required (Authorization: Bearer <token>)")
        digest = hash_token(token)
        for grant in self.current():
            if hmac.compare_digest(grant.sha256, digest):
                grant.refuse_if_expired()
                return grant
        if self.unusable is not None:  # the details are in the server's log, not for any caller
            raise AuthError(401, TOKENS_FILE_UNUSABLE)
        raise AuthError(401, "unknown token")

    def check(self, authorization: str | None, dataset: str, access: Access) -> Grant | None:
        """Raise AuthError unless the request may ``access`` ``dataset``; returns the grant."""
        grant = self.subject(authorization)
        if grant is not None and not grant.allows(dataset, access):
            raise AuthError(403, f"{grant.subject} may not {access.value} {dataset}")
        return grant


def _regular(path: Path) -> None:
    """A tokens file is a regular file (a device, a FIFO or a directory never is one: reading a FIFO
    would wait for a writer, and replacing a device would harm the system)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TokensFileError(f"cannot use {path} as a tokens file: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise TokensFileError(f"cannot use {path} as a tokens file: it is not a regular file")


def _read_document(path: Path) -> TokensDocument:
    """The validated tokens file: the one schema every reader and writer goes through."""
    _regular(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise TokensFileError(f"no tokens file at {path}") from None
    except OSError as exc:
        raise TokensFileError(f"cannot read tokens file {path}: {exc.strerror or exc}") from None
    return parse_tokens(raw, path)


def _write_document(path: Path, document: TokensDocument) -> None:
    """Replace the tokens file atomically and durably (mode 0600), the way every output path is written: a
    running server never reads half of it. A symlink is followed (the file it points to is replaced, the
    link stays). ``document`` is checked first: a file this writes always reads back."""
    content = tokens_bytes(document)
    parse_tokens(content, path)
    _regular(path)
    try:
        with open_output(str(path), mode=0o600) as sink:
            sink.write(content)
    except (OutputError, LocalError) as exc:
        raise TokensFileError(f"{exc} (the tokens file is unchanged)") from None


@contextlib.contextmanager
def _changing(path: Path) -> Iterator[None]:
    """Hold an OS lock on the tokens file's directory while the file is read, changed and replaced, so
    two commands changing it at once both keep their change (the file itself is replaced by a rename,
    so it cannot carry the lock; the directory creates nothing, so a command that fails leaves nothing
    behind). Waits at most TOKENS_LOCK_WAIT_SECONDS for the other."""
    directory = Path(os.path.realpath(path)).parent
    try:
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        raise TokensFileError(f"cannot lock tokens file {path}: {exc.strerror or exc}") from None
    try:
        deadline = time.monotonic() + TOKENS_LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TokensFileError(
                        f"tokens file {path} is being changed by another command for over "
                        f"{TOKENS_LOCK_WAIT_SECONDS:g} s"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def new_token() -> str:
    """A new secret. Its prefix names the product: never an argument that starts with "-" (which
    `--token VALUE` would read as an option), and recognisable where a secret scanner looks for leaks."""
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def add_token(
    path: Path,
    subject: str,
    read: list[str],
    write: list[str],
    token: str | None = None,
    expires: datetime | None = None,
) -> str:
    """Append a token (``token``, or a new one; working until ``expires`` when given) to the tokens file
    (creating it, mode 0600); returns the secret. The entry goes through the file's schema: a subject or
    pattern the file could not hold is refused (TokensFileError) and nothing is written."""
    token = token or new_token()
    _regular(path)
    with _changing(path):
        document = _read_document(path) if path.exists() else TokensDocument(tokens=[])
        entry = new_entry(subject, hash_token(token), read, write, expires)
        _write_document(path, TokensDocument(tokens=[*document.tokens, entry]))
    return token


def revoke_tokens(path: Path, subject: str) -> int:
    """Remove every token of ``subject`` from the tokens file; returns how many there were."""
    _regular(path)
    with _changing(path):
        document = _read_document(path)
        kept = [entry for entry in document.tokens if entry.subject != subject]
        if len(kept) != len(document.tokens):
            _write_document(path, TokensDocument(tokens=kept))
    return len(document.tokens) - len(kept)
