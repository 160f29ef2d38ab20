"""``ingest(...)``: the SDK entry point, with the caller's SparkSession (a notebook or a scheduler
pays the JVM's start-up once), and the transaction around the Spark job.

Nothing becomes visible until the block commits: the job writes into a scratch directory, the slice
and checkpoint files become content-addressed objects (invisible until referenced), the blocks
(SetDataSchema on a first ingest, then AddData) commit by compare-and-swap of head, and only then
does the workspace's checkpoint switch to the new one. Any failure before leaves the dataset as it was.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smart_transfer.checkpoint.files import CheckpointError, store_checkpoint
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.ingest.errors import IngestError, from_spark, spark_failure
from smart_transfer.ingest.inputs import Input, fingerprint, resolve_inputs
from smart_transfer.ingest.schema import ChainState, chain_state, parse_ddl, schema_event
from smart_transfer.ingest.state import SOURCE_PREFIX, IngestState, StateError, load_state
from smart_transfer.model import AddData, Checkpoint, DataSlice, Event, ObjectRef, OffsetInterval
from smart_transfer.repo import ObjectKind, RepositoryError, Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.storage.digest import digest_file

if TYPE_CHECKING:
    from smart_transfer.ingest.job import JobOutcome, JobSpec


@dataclass
class IngestResult:
    """What one ingest run did."""

    dataset: str
    inputs: list[str]
    rows_read: int
    rows_added: int
    head: str | None
    data_slice: str | None
    checkpoint: str | None
    checkpoint_files_stored: int = 0
    checkpoint_bytes_stored: int = 0
    #: manifest objects stored: the root and the pages it does not share with the previous checkpoint
    checkpoint_pages_stored: int = 0
    schema_recorded: bool = False
    #: append mode: inputs skipped because an earlier run ingested exactly these files
    inputs_already_ingested: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _installed_checkpoint(workspace: Workspace, dataset: DatasetRepository, chain: ChainState) -> Path | None:
    """The checkpoint directory of the chain's latest checkpoint, installed from the workspace's
    objects when the slot lags behind (None: the chain has none)."""
    if chain.checkpoint is None:
        return None
    if workspace.lost.seen(dataset.name):
        # the installed checkpoint's files are links to objects, which may be the damaged ones
        raise IngestError(
            f"{dataset.name}: verify or a read found objects of it lost; pull it first (that fetches them)"
        )
    slot = CheckpointSlot(workspace.root, dataset.name)
    if slot.current_hash() == chain.checkpoint.physical_hash and slot.current.exists():
        return slot.current
    try:
        return slot.install(dataset, dataset.read_manifest(chain.checkpoint))
    except (CheckpointError, RepositoryError) as exc:
        workspace.lost.mark_quietly(dataset.name)  # the pull it asks for looks for what is lost
        raise IngestError(f"{dataset.name}: its latest checkpoint is not usable here ({exc}); pull it again") from None


def _previous_state(directory: Path | None, primary_key: tuple[str, ...], name: str) -> IngestState | None:
    if directory is None:
        return None
    try:
        state = load_state(directory)
    except StateError as exc:
        raise IngestError(f"{name}: cannot continue from its checkpoint: {exc}") from None
    if state.primary_key != primary_key:
        was = f"with primary key {', '.join(state.primary_key)}" if state.primary_key else "without a primary key"
        raise IngestError(f"{name} was ingested {was}; ingest it the same way (or into a new dataset)")
    return state


def _new_inputs(items: list[Input], directory: Path | None) -> tuple[list[Input], list[bytes], list[Input]]:
    """Append mode: (inputs to read, their fingerprints, inputs an earlier run already ingested)."""
    # rocksdict loads only for an append ingest into an existing checkpoint
    from smart_transfer.checkpoint.files import open_checkpoint

    seen: set[bytes] = set()
    if directory is not None:
        db = open_checkpoint(directory, read_only=True)
        try:
            for key in db.keys(from_key=SOURCE_PREFIX):
                if not (isinstance(key, bytes) and key.startswith(SOURCE_PREFIX)):
                    break
                seen.add(key[len(SOURCE_PREFIX) :])
        finally:
            db.close()
    fresh: list[Input] = []
    prints: list[bytes] = []
    skipped: list[Input] = []
    for item in items:
        mark = fingerprint(item)
        if mark is not None and mark in seen:
            skipped.append(item)
            continue
        if mark is not None:
            seen.add(mark)
            prints.append(mark)
        fresh.append(Input(item.path, item.fmt, len(fresh)))
    return fresh, prints, skipped


def _run(spark: Any, spec: JobSpec) -> JobOutcome:
    # the job's Spark side loads once a session runs
    from smart_transfer.ingest import job
    from smart_transfer.ingest.spark import job_conf

    try:
        with job_conf(spark):
            return job.run(spark, spec)
    except Exception as exc:
        if not from_spark(exc):
            raise
        raise spark_failure(exc) from None


def _commit(
    workspace: Workspace, repo: DatasetRepository, spec: JobSpec, outcome: JobOutcome, *, record_schema: bool
) -> dict[str, Any]:
    """Make the job's output visible: objects, then the blocks, then the workspace's checkpoint."""
    assert outcome.slice_file is not None and outcome.checkpoint_dir is not None
    digest = digest_file(outcome.slice_file)
    slice_ref = ObjectRef(ObjectKind.DATA, digest.multihash, digest.size)
    if repo.objects_missing([slice_ref]):
        workspace.local_store.adopt(repo.object_key(slice_ref), outcome.slice_file)
    stored = store_checkpoint(repo, outcome.checkpoint_dir)
    manifest = stored.manifest
    manifest_hash = manifest.hash()
    events: list[Event] = [schema_event(outcome.columns)] if record_schema else []
    interval = OffsetInterval(spec.next_offset, spec.next_offset + outcome.rows_added - 1)
    events.append(
        AddData(
            new_data=DataSlice(digest.multihash, digest.size, interval, outcome.rows_added),
            new_checkpoint=Checkpoint(manifest_hash, len(manifest.encode())),
        )
    )
    tip = repo.append(events)
    slot = CheckpointSlot(workspace.root, repo.name)
    slot.directory.mkdir(parents=True, exist_ok=True)
    destination = slot.path_for(manifest_hash)
    if not destination.exists():
        outcome.checkpoint_dir.rename(destination)
    slot.switch_to(destination)
    return {
        "head": str(tip.head),
        "data_slice": str(digest.multihash),
        "checkpoint": str(manifest_hash),
        "checkpoint_files_stored": stored.files,
        "checkpoint_bytes_stored": stored.bytes,
        "checkpoint_pages_stored": stored.pages,
        "schema_recorded": record_schema,
    }


def ingest(
    workspace: Workspace | str | Path,
    dataset: str,
    inputs: str | Path | Sequence[str | Path],
    *,
    spark: Any,
    format: str | None = None,
    primary_key: Sequence[str] = (),
    schema: str | None = None,
) -> IngestResult:
    """Ingest ``inputs`` (files or directories: CSV, JSON lines or Parquet) into ``dataset`` of the
    workspace as one data slice, in one Spark job on ``spark`` (any SparkSession: local or a cluster).

    ``primary_key``: columns naming a row; rows whose key is new or whose content changed are added,
    identical ones skipped; within one run the last occurrence of a key wins. Without a key every row
    is added and an input ingested before (same files, same bytes) is skipped. ``schema``: Spark DDL
    for CSV/JSON columns (CSV is otherwise all text). Raises :class:`IngestError` (one line) for bad
    input; the dataset is then unchanged."""
    if not isinstance(workspace, Workspace):
        with Workspace(Path(workspace)) as opened:
            return ingest(opened, dataset, inputs, spark=spark, format=format, primary_key=primary_key, schema=schema)
    paths = [inputs] if isinstance(inputs, str | Path) else list(inputs)
    items = resolve_inputs(paths, format)
    repo = workspace.dataset(dataset)
    return _ingest_into(workspace, repo, items, spark=spark, primary_key=tuple(primary_key), schema=schema)


def _ingest_into(
    workspace: Workspace,
    repo: DatasetRepository,
    items: list[Input],
    *,
    spark: Any,
    primary_key: tuple[str, ...],
    schema: str | None,
) -> IngestResult:
    """``ingest`` once the workspace is open and the inputs are found: what the chain continues from,
    the inputs still to read (append mode skips those ingested before), then the job in a scratch
    directory that is removed whatever happens."""
    tip = repo.tip()
    chain = chain_state(repo)
    previous_dir = _installed_checkpoint(workspace, repo, chain)
    previous = _previous_state(previous_dir, primary_key, repo.name)
    prints: list[bytes] = []
    skipped: list[Input] = []
    if not primary_key:
        items, prints, skipped = _new_inputs(items, previous_dir)
    result = IngestResult(repo.name, [i.path for i in items], 0, 0, str(tip.head) if tip else None, None, None)
    result.inputs_already_ingested = [i.path for i in skipped]
    if not items:
        return result
    from smart_transfer.ingest.job import JobSpec  # needs pyspark, which a caller with a session has

    scratch = Path(tempfile.mkdtemp(prefix=".ingest-", dir=workspace.root))
    try:
        spec = JobSpec(
            inputs=items,
            primary_key=primary_key,
            user_schema=parse_ddl(schema) if schema is not None else None,
            recorded=chain.columns,
            previous=previous,
            previous_dir=previous_dir,
            fingerprints=prints,
            next_offset=tip.next_offset if tip is not None else 0,
            work=scratch,
        )
        return _run_and_commit(spark, workspace, repo, spec, result, record_schema=chain.schema is None)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_and_commit(
    spark: Any,
    workspace: Workspace,
    repo: DatasetRepository,
    spec: JobSpec,
    result: IngestResult,
    *,
    record_schema: bool,
) -> IngestResult:
    """Run the job, then commit what it added (nothing when no row was new), filling in ``result``."""
    outcome = _run(spark, spec)
    result.rows_read = outcome.rows_read
    if outcome.slice_file is None:
        return result
    committed = _commit(workspace, repo, spec, outcome, record_schema=record_schema)
    result.rows_added = outcome.rows_added
    for name, value in committed.items():
        setattr(result, name, value)
    return result
