"""The verified commit, one policy for every path: before head moves, each object the new blocks
reference must be in the store with the size its block records and an ETag the server trusts: promised
in the smart session that uploaded it (the MD5 bound into its PUT, or for an object uploaded in parts
the multipart ETag of the MD5s bound into its parts' PUTs, see ``sync.multipart``), or the one the
store gave an object the server itself stored after hashing its body (a simple-protocol PUT). An
object with no trusted ETag, or whose ETag the store makes opaque (S3 with SSE-KMS or SSE-C: the ETag
is then not the MD5 of the bytes), is confirmed otherwise: by the SHA-256 checksum the store checked
on arrival when it kept one, else read back and hashed, at most ``readback_limit`` bytes per commit.
Then head moves by compare-and-swap, or nothing changes."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence

from smart_transfer.model import ChainTip, ModelError, Multihash, NewBlock, ObjectKind, ObjectRef, checkpoint_refs
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.multihash import SHA2_256
from smart_transfer.model.walk import walk_chain
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import InvalidHeadDetails, ProtocolError, UploadInvalidDetails
from smart_transfer.repo import HeadMoved
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.layout import object_prefix
from smart_transfer.storage import ObjectInfo, ObjectNotFound
from smart_transfer.storage.base import DEFAULT_READBACK_BYTES, MD5_MISMATCH, stored_mismatch
from smart_transfer.storage.digest import digest_chunks
from smart_transfer.sync.attach import check_expected_head, place_push
from smart_transfer.sync.bundle import check_bundle, invalid_block

#: How many failing objects an UploadInvalid error lists.
MAX_LISTED_FAILURES = 20
ObjectKey = tuple[ObjectKind, Multihash]


#: Keys one listing page answers (S3's page).
LISTING_PAGE_KEYS = 1000
#: A listing of the dataset's data objects replaces the HEADs only when it takes at most one page per
#: this many objects to check (a first push of many objects, onto a dataset that has few).
OBJECTS_PER_LISTING_PAGE = 8


def uncommitted_heads(dataset: DatasetRepository, refs: Sequence[ObjectRef]) -> dict[str, ObjectInfo | None]:
    """What the store holds under the key of each object of ``refs`` the index does not know as
    committed (key → size and ETag, None when absent). One HEAD per such object, in parallel; or, per
    kind of object on a store of round trips, one listing of the dataset's objects of that kind when it
    takes at most one page per OBJECTS_PER_LISTING_PAGE objects asked about (a first push of many data
    objects, a checkpoint of many files). Either way the requests grow with the objects asked about,
    not with the dataset. A key missing from the answer is committed."""
    pending = [ref for ref in refs if not dataset.has_object(ref)]
    found: dict[str, ObjectInfo | None] = {}
    to_head: list[ObjectRef] = []
    for kind in ObjectKind:
        asked = [ref for ref in pending if ref.kind is kind]
        listed = _small_listing(dataset, kind, len(asked)) if asked else None
        if listed is None:
            to_head += asked
        else:
            found.update({dataset.object_key(ref): listed.get(dataset.object_key(ref)) for ref in asked})
    found.update(dataset.store.head_many([dataset.object_key(ref) for ref in to_head]))
    return found


def _small_listing(dataset: DatasetRepository, kind: ObjectKind, count: int) -> dict[str, ObjectInfo] | None:
    """The dataset's objects of ``kind``, by key, when listing them is cheaper than ``count`` HEADs;
    None otherwise: when the store answers without round trips, when the chain says there are too
    many (at most one data object per block), or when the listing runs past the budget (leftovers of
    failed pushes, a dataset of many checkpoint files: HEADs then, after at most one page per
    OBJECTS_PER_LISTING_PAGE objects asked about)."""
    budget = count // OBJECTS_PER_LISTING_PAGE * LISTING_PAGE_KEYS
    if not dataset.store.round_trips or budget == 0:
        return None
    if kind is ObjectKind.DATA:
        tip = dataset.indexed_tip()
        if (tip.sequence_number + 1 if tip is not None else 0) + count > budget:
            return None
    found: dict[str, ObjectInfo] = {}
    for info in dataset.store.list(object_prefix(dataset.name, kind)):
        if len(found) >= budget:
            return None
        found[info.key] = info
    return found


class ReadBack:
    """What one commit may still read back from the store to confirm objects (bytes)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.left = limit

    def take(self, size: int) -> bool:
        """Spend ``size`` bytes of the budget; False (nothing spent) when fewer are left."""
        if size > self.left:
            return False
        self.left -= size
        return True


def _confirm_bytes(dataset: DatasetRepository, ref: ObjectRef, info: ObjectInfo, budget: ReadBack) -> str | None:
    """Confirm the bytes of an object whose ETag cannot: the store's own SHA-256 checksum (checked by the
    store on arrival) when it kept one, else read back and hashed within the budget."""
    if info.checksum_sha256 and ref.physical_hash.code == SHA2_256:
        if info.checksum_sha256 != base64.b64encode(ref.physical_hash.digest).decode():
            return "the store's SHA-256 checksum of it is not its hash"
        return None
    if not budget.take(ref.size):
        return (
            f"cannot be confirmed: its ETag is not an MD5 and reading it back passes the {budget.limit}-byte "
            "read-back limit of one push (--verify-read-limit)"
        )
    digest = digest_chunks(dataset.store.stream(dataset.object_key(ref)), ref.physical_hash.code)
    return digest.mismatch(ref.physical_hash, ref.size)


def _problem(
    dataset: DatasetRepository, ref: ObjectRef, info: ObjectInfo | None, etag: str | None, budget: ReadBack
) -> str | None:
    problem = stored_mismatch(info, ref.size, etag)
    if problem == MD5_MISMATCH:
        # a listing does not say how an object is encrypted, its HEAD does (an opaque ETag is compared
        # with nothing): asked once, and only of an object whose ETag differs
        info = dataset.store.head(dataset.object_key(ref))
        problem = stored_mismatch(info, ref.size, etag)
    if problem is None and info is not None and (etag is None or info.opaque_etag):
        problem = _confirm_bytes(dataset, ref, info, budget)
    return None if problem is None else f"{ref.label}: {problem}"


def upload_invalid(failures: Sequence[str]) -> ProtocolError:
    """The error that ends a commit whose objects are missing or wrong (``failures``: one line each)."""
    return ProtocolError(
        ErrorCode.UPLOAD_INVALID,
        f"{len(failures)} object(s) missing or wrong; head not moved. First: {failures[0]}",
        UploadInvalidDetails(objects=list(failures[:MAX_LISTED_FAILURES]), count=len(failures)),
    )


def verify_uploads(
    dataset: DatasetRepository,
    refs: Sequence[ObjectRef],
    promised_etags: Mapping[ObjectKey, str],
    readback_limit: int = DEFAULT_READBACK_BYTES,
) -> None:
    """Check every object of ``refs`` the repository does not already hold (UploadInvalid if any
    fails). ``promised_etags``: the ETags this commit's uploads promised: the hex MD5 of an object sent
    in one PUT, the multipart ETag of its parts' MD5s for one sent in parts. ``readback_limit``: the
    most bytes read back to confirm objects no ETag or checksum confirms (more fail the commit)."""
    heads = uncommitted_heads(dataset, refs)  # the index decides once what is committed
    budget = ReadBack(readback_limit)
    failures = []
    for ref in refs:
        key = dataset.object_key(ref)
        if key not in heads:
            continue  # committed
        info = heads[key]
        etag = promised_etags.get((ref.kind, ref.physical_hash)) or dataset.staged_md5(ref.kind, ref.physical_hash)
        problem = _problem(dataset, ref, info, etag, budget)
        if problem is not None:
            failures.append(problem)
    if failures:
        raise upload_invalid(failures)


def commit_chain(
    dataset: DatasetRepository,
    expected: Multihash | None,
    base: ChainTip | None,
    blocks: Sequence[NewBlock],
    manifests: Mapping[Multihash, CheckpointManifest],
    *,
    blocks_stored: bool,
) -> ChainTip:
    """Move head from ``expected`` to the last of ``blocks`` (InvalidHead when another writer moved it
    first: nothing changed, and the caller should pull and try again)."""
    try:
        return dataset.commit(expected, base, blocks, manifests, blocks_stored=blocks_stored)
    except HeadMoved as exc:
        raise ProtocolError(
            ErrorCode.INVALID_HEAD,
            f"another push moved the head of {dataset.name} first; pull and try again",
            InvalidHeadDetails(expected=exc.expected, actual=exc.actual),
        ) from None


def commit_uploaded(
    dataset: DatasetRepository,
    expected: Multihash | None,
    new_head: Multihash,
    force: bool,
    readback_limit: int = DEFAULT_READBACK_BYTES,
) -> ChainTip:
    """Move head to ``new_head``, whose blocks and objects were uploaded one by one (the simple
    protocol): walk back from it through the store to the current chain, attach (the force/Seed
    rule), check the manifests and every object (``readback_limit``: see :func:`verify_uploads`),
    then the compare-and-swap."""
    current = dataset.tip()
    check_expected_head(expected, current.head if current is not None else None, False)
    if current is not None and new_head == current.head:
        return current
    try:
        walk = walk_chain(new_head, _uploaded_block(dataset), dataset.on_chain)
    except ModelError as exc:
        raise ProtocolError(ErrorCode.INVALID_BLOCKS, str(exc)) from None
    base = place_push(dataset, current, walk.blocks, new_head, force)
    if not walk.blocks:  # the new head is an older block of the chain: only force moves head back
        return commit_chain(dataset, expected, base, [], {}, blocks_stored=True)
    manifests = {}
    for ref in checkpoint_refs(walk.blocks):
        try:
            manifests[ref.physical_hash] = dataset.store.get(dataset.object_key(ref))
        except ObjectNotFound:
            raise ProtocolError(
                ErrorCode.UPLOAD_INVALID,
                f"checkpoint manifest {ref.physical_hash} is not uploaded",
                UploadInvalidDetails(objects=[f"{ref.label}: missing"], count=1),
            ) from None
    bundle = check_bundle(walk.blocks, manifests, dataset.page_source)  # pages from the store
    verify_uploads(dataset, bundle.objects(), {}, readback_limit)
    # the walked blocks (uploaded one by one, or in packs) become this commit's pack once every check
    # passed (a refused head move stores nothing): one write, and what head references is stored
    # whatever gc removed since the index cached it
    dataset.store_blocks(walk.blocks)
    return commit_chain(dataset, expected, base, bundle.blocks, bundle.manifests, blocks_stored=True)


def _uploaded_block(dataset: DatasetRepository) -> Callable[[Multihash], bytes]:
    def fetch(block_hash: Multihash) -> bytes:
        try:
            return dataset.block_bytes(block_hash)
        except CorruptRepository:
            raise invalid_block(block_hash, f"block {block_hash} is not uploaded; PUT it first") from None

    return fetch
