"""What a client concludes from the remote head it learns, the same for pull and push over either
transport: whether the local dataset is ahead of the remote, whether the remote has blocks the local
chain lacks, and what a push does when the remote refused the head it expected (InvalidHead). The
client drivers ask; they do not decide."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from smart_transfer.model import ModelError, Multihash

#: How often a push retries after learning that its record of the remote head was stale.
MAX_STALE_HEAD_RETRIES = 3

#: Membership in the local chain (``LocalChain.contains``: index lookups, cheap).
OnChain = Callable[[Multihash], bool]


def _parsed(head: Multihash | str | None) -> Multihash | None:
    if not isinstance(head, str):
        return head
    try:
        return Multihash.parse(head)
    except ModelError:
        return None  # not even a hash: certainly no block of ours


def local_ahead(contains: OnChain, local_head: Multihash | None, remote_head: Multihash | str | None) -> bool:
    """The remote head is an older block of the local chain: a pull has nothing to take (and force
    never drops local blocks); a push would move the remote forward. ``remote_head`` may be the text
    an error's details carry."""
    remote = _parsed(remote_head)
    return remote is not None and remote != local_head and contains(remote)


def remote_has_more(contains: OnChain, remote_head: Multihash | None) -> bool:
    """The remote head is on no local chain: the remote has blocks the local dataset lacks (a push
    without force must pull first)."""
    return remote_head is not None and not contains(remote_head)


class StaleHead(Enum):
    """What a push does after the remote refused the head it expected (InvalidHead)."""

    RETRY = "retry"  # our record of the remote head was stale: push again from the actual head
    PULL_FIRST = "pull first"  # the remote has blocks the local chain lacks
    FINAL = "final"  # the remote's head is the one we expected: the refusal stands as it is


def after_invalid_head(contains: OnChain, expected: Multihash | None, actual: Multihash | None) -> StaleHead:
    """The stale-head rule: retry from ``actual`` (at most MAX_STALE_HEAD_RETRIES times) when it is a
    block of the local chain other than the one expected."""
    if remote_has_more(contains, actual):
        return StaleHead.PULL_FIRST
    if actual == expected:
        return StaleHead.FINAL
    return StaleHead.RETRY
