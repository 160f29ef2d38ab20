"""Where new blocks attach to a chain, and the force/Seed rule: the one place that decides whether a
history may be extended or replaced. The server applies it to pushes (smart and REST), the client
to pulls (smart and simple)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from smart_transfer.model import ChainTip, ModelError, Multihash, NewBlock, validate_extension
from smart_transfer.model.errors import ChainRuleViolation
from smart_transfer.model.events import Seed
from smart_transfer.model.multihash import hash_text
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import DivergedDetails, InvalidHeadDetails, ProtocolError, SeedMismatchDetails
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.bundle import invalid_block

#: The client's head and this many predecessors are offered as known blocks, one by one; beyond
#: them, blocks at power-of-two distances (so a forced sync resends at most twice what it must).
DENSE_KNOWN_BLOCKS = 64


def check_expected_head(expected: Multihash | None, actual: Multihash | None, force: bool) -> None:
    """A push names the head it expects; unless forced, it must be the current one (InvalidHead)."""
    if expected != actual and not force:
        raise ProtocolError(
            ErrorCode.INVALID_HEAD,
            f"the head is {actual or 'absent'}, not {expected or 'absent'}",
            InvalidHeadDetails(expected=hash_text(expected), actual=hash_text(actual)),
        )


def attach(
    current: ChainTip | None, blocks: Sequence[NewBlock], force: bool, tip_at: Callable[[Multihash], ChainTip | None]
) -> ChainTip | None:
    """The block of the chain ending at ``current`` that ``blocks`` extend (returned as the tip the
    chain had there; None: a new or replaced chain), after checking every chain rule.

    Without force, blocks must extend ``current`` itself (Diverged otherwise). With force they may
    attach to an earlier block of the chain, or start again from a Seed, but only from the same
    Seed: force never replaces a dataset with a different one (SeedMismatch)."""
    if not blocks:
        return current
    first = blocks[0].block
    if current is None or first.prev_block_hash == current.head:
        base = current
    elif not force:
        raise ProtocolError(
            ErrorCode.DIVERGED,
            f"the blocks do not extend head {current.head}: the histories diverged",
            DivergedDetails(remote_head=str(current.head)),
        )
    elif first.prev_block_hash is None:
        if not isinstance(first.event, Seed) or first.event.dataset_id != current.dataset_id:
            raise ProtocolError(
                ErrorCode.SEED_MISMATCH,
                f"force never replaces a dataset with a different Seed (this one is {current.dataset_id})",
                SeedMismatchDetails(remote_dataset_id=current.dataset_id),
            )
        base = None
    else:
        base = tip_at(first.prev_block_hash)
        if base is None:
            raise invalid_block(
                blocks[0].hash, f"the blocks attach to block {first.prev_block_hash}, which is on no chain here"
            )
    try:
        validate_extension(base, ((b.hash, b.block) for b in blocks))
    except ChainRuleViolation as exc:
        raise invalid_block(exc.block_hash, str(exc)) from None
    except ModelError as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, str(exc)) from None
    return base


def rewind_to(dataset: DatasetRepository, current: ChainTip | None, target: Multihash, force: bool) -> ChainTip:
    """The tip the chain had at ``target``, an older block of it, for moving head back: only with
    force, since it drops the blocks after ``target`` (Diverged otherwise)."""
    base = dataset.chain_tip_at(target)
    if base is None or current is None:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, f"block {target} is on no chain here")
    if not force:
        raise ProtocolError(
            ErrorCode.DIVERGED,
            f"head {current.head} is ahead of {target}; moving it back needs force",
            DivergedDetails(remote_head=str(current.head)),
        )
    return base


def place_push(
    dataset: DatasetRepository,
    current: ChainTip | None,
    blocks: Sequence[NewBlock],
    target: Multihash | None,
    force: bool,
) -> ChainTip | None:
    """Where a push puts head, whichever the path (smart or REST): on its ``blocks``, attached by the
    force/Seed rule (``attach``); with no blocks and a ``target`` behind head, back at ``target``
    (``rewind_to``: force only). Returns the tip the blocks attach to (``current`` when nothing
    changes). ``target``: the head the client pushes (None: a client that does not say; then the
    blocks alone decide, and no push moves head back)."""
    if blocks:
        if target is not None and blocks[-1].hash != target:
            raise invalid_block(
                blocks[-1].hash, f"the blocks end at {blocks[-1].hash}, not at the target head {target}"
            )
        return attach(current, blocks, force, dataset.chain_tip_at)
    if target is not None and current is not None and target != current.head:
        return rewind_to(dataset, current, target, force)
    return current


def known_blocks(dataset: DatasetRepository, tip: ChainTip | None) -> list[Multihash]:
    """The blocks a client offers as known (newest first): its head, its 64 predecessors, then blocks
    at power-of-two distances, then its Seed. Whoever holds the other chain finds the last common
    block among them (``last_common``) in one round trip."""
    if tip is None:
        return []
    distances = list(range(min(DENSE_KNOWN_BLOCKS + 1, tip.sequence_number + 1)))
    step = DENSE_KNOWN_BLOCKS * 2
    while step < tip.sequence_number:
        distances.append(step)
        step *= 2
    seqs = [tip.sequence_number - d for d in distances]
    if seqs[-1] != 0:
        seqs.append(0)
    return [dataset.hash_at(seq) for seq in seqs]


def last_common(dataset: DatasetRepository, offered: Sequence[Multihash]) -> ChainTip | None:
    """The newest of ``offered`` (newest first) that is on this dataset's chain."""
    for block_hash in offered:
        tip = dataset.chain_tip_at(block_hash)
        if tip is not None:
            return tip
    return None
