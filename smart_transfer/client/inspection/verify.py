"""``smart-transfer verify``: re-check a local dataset (chain rules, every block and object's hash and
size) and, given a URL, compare it with the remote one. The chain is a Merkle structure (each block
names the hash of the one before): equal heads mean equal datasets; otherwise the walk back from the
remote head finds where the histories part. Corrupt objects are moved to quarantine, so the next pull
fetches them again."""

from __future__ import annotations

import os
import secrets
from dataclasses import asdict, dataclass, field

from smart_transfer.client.inspection.holdings import absent_by_choice, absent_words
from smart_transfer.client.inspection.status import DIVERGED, REMOTE_MISSING, relation_of
from smart_transfer.client.options import ClientOptions
from smart_transfer.client.remote import RemoteDataset
from smart_transfer.client.transports.base import LocalChain
from smart_transfer.client.transports.simple import RestClient
from smart_transfer.model import (
    ModelError,
    Multihash,
    NewBlock,
    ObjectKind,
    ObjectRef,
    checkpoint_refs,
    objects_of,
    validate_chain,
)
from smart_transfer.model.manifest import CheckpointManifest, decode_manifest
from smart_transfer.repo import Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.storage.digest import digest_file
from smart_transfer.transfer.aio import make_session


@dataclass
class VerifyReport:
    """What verify found; ``ok`` when the local copy is whole and not diverged."""

    dataset: str
    head: str
    blocks: int = 0
    objects_checked: int = 0
    problems: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    #: Objects the chain references that the workspace left out by choice (not checked, not problems).
    absent_objects: int = 0
    absent_bytes: int = 0
    #: Of those, data slices outside the range the workspace chose (the rest: older checkpoints' files).
    absent_slices: int = 0
    remote: str | None = None
    remote_head: str | None = None
    relation: str | None = None  # same | local-ahead | remote-ahead | diverged | remote-missing
    common_block: int | None = None
    local_only_blocks: int = 0
    remote_only_blocks: int = 0

    @property
    def ok(self) -> bool:
        """No problem found, and the histories did not diverge."""
        return not self.problems and self.relation != DIVERGED

    def to_dict(self) -> dict[str, object]:
        """The report as JSON values (what `verify --json` prints)."""
        return {**asdict(self), "ok": self.ok}


def verify_local(workspace: Workspace, name: str) -> tuple[VerifyReport, list[NewBlock]]:
    """Check every block and object of the local dataset ``name``."""
    dataset = workspace.dataset(name)
    tip = dataset.require_tip()
    report = VerifyReport(dataset.name, str(tip.head))
    blocks = _checked_blocks(dataset, tip.sequence_number, report)
    manifests = _manifests(workspace, dataset, blocks, report)
    absent = absent_by_choice(workspace, dataset, tip, blocks, manifests)
    for ref in objects_of(blocks, manifests):
        if (ref.kind, ref.physical_hash) in absent:
            report.absent_objects += 1
            report.absent_bytes += ref.size
            report.absent_slices += ref.kind is ObjectKind.DATA
            continue
        _check_object(workspace, dataset, ref, report)
    if report.problems and not report.quarantined:  # a quarantine marked already
        workspace.lost.mark(dataset.name)  # the next pull checks the whole chain and fetches what is lost
    return report, blocks


def _checked_blocks(dataset: DatasetRepository, last: int, report: VerifyReport) -> list[NewBlock]:
    """The chain's blocks, each checked against its hash and decoded, then the chain rules."""
    stored = _stored_blocks(dataset, report)
    blocks: list[NewBlock] = []
    for block_hash in dataset.hashes_between(0, last):
        try:
            content = stored.get(block_hash) or dataset.blocks.read_single(block_hash)
            if content is None:
                report.problems.append(f"block {block_hash}: missing")
                continue
            blocks.append(NewBlock.decode(content, block_hash))
        except CorruptRepository:
            report.problems.append(f"block {block_hash}: content does not match its hash")
        except ModelError as exc:
            report.problems.append(f"block {block_hash}: malformed ({exc})")
    report.blocks = len(blocks)
    if not report.problems:
        try:
            validate_chain((b.hash, b.block) for b in blocks)
        except ModelError as exc:
            report.problems.append(str(exc))
    return blocks


def _manifests(
    workspace: Workspace, dataset: DatasetRepository, blocks: list[NewBlock], report: VerifyReport
) -> dict[Multihash, CheckpointManifest]:
    """The checkpoint manifests the chain references that are present and intact (the rest are reported
    as objects below)."""
    manifests: dict[Multihash, CheckpointManifest] = {}
    for ref in checkpoint_refs(blocks):
        path = workspace.local_store.path_of(dataset.object_key(ref))
        if path.exists() and ref.physical_hash.matches(data := path.read_bytes()):
            try:
                manifests[ref.physical_hash] = decode_manifest(data, dataset.page_source)
            except ModelError as exc:
                report.problems.append(f"checkpoint manifest {ref.physical_hash}: {exc}")
    return manifests


def _check_object(workspace: Workspace, dataset: DatasetRepository, ref: ObjectRef, report: VerifyReport) -> None:
    """One object's hash and size; a corrupt one goes to quarantine (the next pull fetches it again)."""
    report.objects_checked += 1
    path = workspace.local_store.path_of(dataset.object_key(ref))
    label = f"{ref.kind.value}/{ref.physical_hash}"
    if not path.exists():
        report.problems.append(f"{label}: missing")
        return
    digest = digest_file(path, ref.physical_hash.code)
    if digest.mismatch(ref.physical_hash, ref.size) is not None:
        report.problems.append(f"{label}: corrupt ({digest.size} bytes, hash {digest.multihash})")
        if not report.quarantined:  # before the first move: a verify killed after it leaves the mark
            workspace.lost.mark(dataset.name)
        workspace.quarantine.mkdir(parents=True, exist_ok=True)
        os.replace(path, workspace.quarantine / f"{ref.physical_hash}-{secrets.token_hex(4)}")
        report.quarantined.append(label)


def _stored_blocks(dataset: DatasetRepository, report: VerifyReport) -> dict[Multihash, bytes]:
    """The blocks of every pack in the workspace's store, each pack checked (a corrupt one is reported)."""
    found: dict[Multihash, bytes] = {}
    for info in dataset.blocks.packs():
        try:
            found.update(dataset.blocks.read(info.key) or ())
        except CorruptRepository as exc:
            report.problems.append(str(exc))
    return found


async def compare_remote(
    report: VerifyReport, blocks: list[NewBlock], url: str, token: str | None, options: ClientOptions
) -> None:
    """Fill in how the local chain relates to the remote one: walk back from the remote head (one
    REST request per block) to the first block the local chain has."""
    remote = RemoteDataset.parse(url)
    report.remote = remote.url
    local_seq = {b.hash: b.block.sequence_number for b in blocks}
    local_tip_seq = len(blocks) - 1
    async with make_session(options.parallel, options.answer_timeouts) as http:  # the server answers
        rest = RestClient(http, remote, token, redirect=True)
        head = await rest.head()
        report.remote_head = str(head) if head is not None else None
        if head is None:
            report.relation = REMOTE_MISSING
            return
        local = LocalChain(None, [], lambda h: h in local_seq)
        walked, common_hash = await rest.walk(head, local)
    common = local_seq.get(common_hash) if common_hash is not None else None
    report.common_block = common
    report.remote_only_blocks = len(walked)
    report.local_only_blocks = local_tip_seq - (common if common is not None else -1)
    report.relation = relation_of(report.local_only_blocks, report.remote_only_blocks)


RELATIONS = {
    "same": "identical to the remote (same head)",
    "local-ahead": "ahead of the remote by {local} block(s)",
    "remote-ahead": "behind the remote by {remote} block(s)",
    "diverged": "diverged from the remote after block {common}: {local} local-only and {remote} remote-only block(s)",
    "remote-missing": "the remote has no such dataset",
}


def print_report(report: VerifyReport) -> None:
    """The report as text lines."""
    print(f"{report.dataset}: {report.blocks} block(s), {report.objects_checked} object(s) checked, head {report.head}")
    for problem in report.problems:
        print(f"  problem: {problem}")
    if report.quarantined:
        print(f"  {len(report.quarantined)} corrupt object(s) moved to quarantine; `pull` fetches them again")
    if report.absent_objects:
        print("  " + absent_words(report.dataset, report.absent_objects, report.absent_bytes, report.absent_slices))
    if report.relation is not None:
        relation = RELATIONS[report.relation].format(
            local=report.local_only_blocks, remote=report.remote_only_blocks, common=report.common_block
        )
        print(f"  {relation} ({report.remote})")
    if report.ok:
        print("  ok")
