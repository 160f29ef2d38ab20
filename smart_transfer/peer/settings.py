"""The settings of ``peer serve``, in a light module so ``--help`` shows them without loading aiohttp."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Where a peer listens unless told otherwise: this machine only.
DEFAULT_PEER_HOST = "127.0.0.1"
DEFAULT_PEER_PORT = 8081
#: Object transfers a peer serves at once; more are answered 429 Busy with Retry-After.
DEFAULT_PEER_MAX_TRANSFERS = 64
#: The Retry-After (seconds) of a busy answer.
DEFAULT_PEER_RETRY_AFTER = 1
#: Read size while streaming a rate-limited object.
PEER_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class PeerSettings:
    """What a peer serves and how much at once."""

    workspace: Path
    host: str = DEFAULT_PEER_HOST
    port: int = DEFAULT_PEER_PORT
    max_transfers: int = DEFAULT_PEER_MAX_TRANSFERS
    retry_after: int = DEFAULT_PEER_RETRY_AFTER
    #: Bytes per second for all transfers together (None: unlimited).
    limit_rate: int | None = None
