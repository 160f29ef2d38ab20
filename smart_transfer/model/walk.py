"""The one chain walker: back from a head, block by block, until a block the caller already knows
(or the Seed). It does no I/O: the caller fetches the block it names (``wanted``) from wherever the
chain lives (a store, the index, a remote server) and hands the bytes back (``add``). Every path that
walks a chain (index sync, REST head moves, simple pulls and pushes, verify, gc) uses it, so each
checks hashes, decoding and the walk bound the same way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from smart_transfer.model.block import NewBlock
from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.multihash import Multihash

#: Longest chain one walk follows (bounds memory and time on hostile or corrupt chains).
MAX_CHAIN_WALK = 10_000_000

IsKnown = Callable[[Multihash], bool]


class ChainWalk:
    """A walk back from ``head``: ``wanted`` names the next block to fetch (None when done)."""

    def __init__(self, head: Multihash | None, is_known: IsKnown, max_blocks: int = MAX_CHAIN_WALK) -> None:
        self._is_known = is_known
        self._max_blocks = max_blocks
        self._walked: list[NewBlock] = []
        #: The known block the walk stopped at (None: it reached the Seed or there was no head).
        self.base: Multihash | None = None
        self._cursor: Multihash | None = None
        self._step_to(head)

    def _step_to(self, block_hash: Multihash | None) -> None:
        if block_hash is not None and self._is_known(block_hash):
            self.base, self._cursor = block_hash, None
        else:
            self._cursor = block_hash

    @property
    def wanted(self) -> Multihash | None:
        """The block to fetch next, or None when the walk is over."""
        return self._cursor

    def add(self, data: bytes) -> NewBlock:
        """The bytes of ``wanted``: checked against its hash, decoded, and the walk moves on."""
        cursor = self._cursor
        if cursor is None:
            raise ValueError("the walk is over")
        if not cursor.matches(data):
            raise InvalidBlock(f"block {cursor} does not match its hash")
        item = NewBlock.decode(data, cursor)
        if len(self._walked) >= self._max_blocks:
            raise InvalidBlock(f"chain longer than {self._max_blocks} blocks")
        self._walked.append(item)
        self._step_to(item.block.prev_block_hash)
        return item

    @property
    def blocks(self) -> list[NewBlock]:
        """The blocks walked, oldest first (all of them come after ``base``)."""
        return self._walked[::-1]


def walk_chain(
    head: Multihash | None, fetch: Callable[[Multihash], bytes], is_known: IsKnown, max_blocks: int = MAX_CHAIN_WALK
) -> ChainWalk:
    """Walk back from ``head`` fetching each block with ``fetch`` until a known block or the Seed."""
    walk = ChainWalk(head, is_known, max_blocks)
    while (wanted := walk.wanted) is not None:
        walk.add(fetch(wanted))
    return walk


async def walk_chain_async(
    head: Multihash | None,
    fetch: Callable[[Multihash], Awaitable[bytes]],
    is_known: IsKnown,
    max_blocks: int = MAX_CHAIN_WALK,
) -> ChainWalk:
    """``walk_chain`` for fetches that are awaited (blocks from a remote server)."""
    walk = ChainWalk(head, is_known, max_blocks)
    while (wanted := walk.wanted) is not None:
        walk.add(await fetch(wanted))
    return walk
