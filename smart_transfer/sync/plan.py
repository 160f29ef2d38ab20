"""What a pull sends: the blocks between the client's head (or the last common block) and the target,
the objects they reference and the manifests of their checkpoints (server side, both protocols)."""

from __future__ import annotations

from msgspec import Struct, field

from smart_transfer.model import ChainTip, Multihash, ObjectRef, committed_refs
from smart_transfer.model.bulk import collector_paused
from smart_transfer.model.manifest_delta import pages_to_send
from smart_transfer.model.objects import with_files
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import DivergedDetails, InvalidIntervalDetails, ProtocolError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.attach import last_common
from smart_transfer.sync.pages import held_pages


class PullPlan(Struct):
    """Blocks (oldest first, as stored), objects and manifests one pull moves."""

    target: ChainTip
    begin_after: Multihash | None
    blocks: list[tuple[Multihash, bytes]] = field(default_factory=list)
    objects: list[ObjectRef] = field(default_factory=list)
    manifests: dict[Multihash, bytes] = field(default_factory=dict)

    @property
    def object_bytes(self) -> int:
        return sum(r.size for r in self.objects)


def plan_pull(
    dataset: DatasetRepository,
    begin_after: Multihash | None,
    stop_at: Multihash | None,
    force: bool,
    known: list[Multihash],
) -> PullPlan:
    """Decide what a pull moves. ``begin_after`` is the client's head: when it is not on the chain the
    histories diverged (Diverged), unless forced: then the blocks after the last common block among
    ``known`` are sent (all of them when there is none)."""
    tip = dataset.require_tip()
    target = tip
    if stop_at is not None:
        found = dataset.chain_tip_at(stop_at)
        if found is None:
            raise ProtocolError(
                ErrorCode.INVALID_INTERVAL,
                f"stop_at {stop_at} is not on the chain",
                InvalidIntervalDetails(remote_head=str(tip.head)),
            )
        target = found
    start = dataset.chain_tip_at(begin_after) if begin_after is not None else None
    if begin_after is not None and start is None:
        if not force:
            raise ProtocolError(
                ErrorCode.DIVERGED,
                f"block {begin_after} is not on the chain of {dataset.name}: the histories diverged",
                DivergedDetails(remote_head=str(tip.head)),
            )
        start = last_common(dataset, known)
    if start is not None and start.sequence_number > target.sequence_number:
        raise ProtocolError(
            ErrorCode.INVALID_INTERVAL,
            f"begin_after (block {start.sequence_number}) comes after stop_at (block {target.sequence_number})",
            InvalidIntervalDetails(remote_head=str(tip.head)),
        )
    plan = PullPlan(target, start.head if start is not None else None)
    with collector_paused():  # 100,000 (hash, bytes) pairs kept alive: see model/bulk.py
        plan.blocks = list(dataset.blocks_after(target, plan.begin_after))
    refs = committed_refs(data for _, data in plan.blocks)
    manifests = dataset.manifests_of(refs)
    plan.objects = with_files(refs, manifests)  # each checkpoint's files travel as objects too
    # the manifest pages the client does not hold already (those of its last checkpoint it keeps)
    plan.manifests = pages_to_send(manifests.values(), held_pages(dataset, plan.begin_after, manifests))
    return plan
