"""The settings of ``peer serve``, in a light module so ``--help`` shows them without loading aiohttp."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from smart_transfer.config import check_settings, setting
from smart_transfer.config.units import size

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
    """What a peer serves and how much at once: one declaration per ``peer serve`` setting."""

    workspace: Path
    host: str = setting(DEFAULT_PEER_HOST, "--host", "address to bind")
    port: int = setting(DEFAULT_PEER_PORT, "--port", "port to bind", parse=int, minimum=1, maximum=65535)
    max_transfers: int = setting(
        DEFAULT_PEER_MAX_TRANSFERS,
        "--max-transfers",
        "objects sent at once; more are answered 429 Busy with Retry-After",
        parse=int,
        minimum=1,
        maximum=100_000,
    )
    retry_after: int = setting(
        DEFAULT_PEER_RETRY_AFTER,
        "--retry-after",
        "seconds a busy answer asks to wait",
        parse=int,
        minimum=1,
        maximum=3600,
        unit="seconds",
    )
    limit_rate: int | None = setting(
        None,
        "--limit-rate",
        "bandwidth limit for all transfers together, e.g. 500K or 10M (default: unlimited)",
        parse=size,
        minimum=1,
        metavar="RATE",
    )

    def __post_init__(self) -> None:
        check_settings(self)
