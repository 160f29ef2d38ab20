"""Block packs on both stores (the embedded one and the local Ceph S3): a commit stores its blocks as
one pack, repositories written before packs (one object per block) are read, extended and converted by
``repack``, gc collects packs no chain needs, and the simple protocol serves single blocks out of packs."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from smart_transfer.model import (
    AddData,
    DatasetName,
    DataSlice,
    MetadataBlock,
    Multihash,
    NewBlock,
    OffsetInterval,
    Seed,
)
from smart_transfer.model.block import utc_now
from smart_transfer.model.pack import encode_pack
from smart_transfer.repo import ObjectKind, Repository, Workspace
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.errors import CorruptRepository
from smart_transfer.repo.gc import collect_garbage
from smart_transfer.repo.layout import block_key, block_prefix, head_key, object_key, pack_key, pack_prefix
from smart_transfer.repo.packs import DatasetBlocks
from smart_transfer.storage import ObjectStore
from smart_transfer.storage.local import LocalStore
from smart_transfer.storage.s3 import S3Store
from tests.conftest import CLI, ServerProcess, backend_args, make_files, run_cli, summary


def old_layout(store: ObjectStore, name: str, count: int, size: int = 100) -> list[NewBlock]:
    """A dataset written the way repositories were before packs: a Seed and ``count`` AddData blocks,
    each block its own object ``{name}/blocks/{hash}``, each referencing a data object; then head."""
    blocks = [NewBlock.of(MetadataBlock(0, None, utc_now(), Seed("did:odf:f" + secrets.token_hex(32))))]
    for i in range(count):
        payload = os.urandom(size)
        digest = Multihash.of(payload)
        store.put(object_key(name, ObjectKind.DATA, digest), payload)
        event = AddData(DataSlice(digest, size, OffsetInterval(i, i), 1))
        blocks.append(NewBlock.of(MetadataBlock(i + 1, blocks[-1].hash, utc_now(), event)))
    for block in blocks:
        store.put(block_key(name, block.hash), block.data)
    assert store.compare_and_swap(head_key(name), None, str(blocks[-1].hash).encode())
    return blocks


def keys(store: ObjectStore, prefix: str) -> list[str]:
    return [info.key for info in store.list(prefix)]


def chain_of(repo: Repository, name: str) -> list[tuple[Multihash, bytes]]:
    dataset = repo.dataset(name)
    return list(dataset.blocks_after(dataset.require_tip(), None))


def extend(dataset: DatasetRepository, count: int) -> None:
    dataset.append([AddData(new_watermark=f"2024-01-01T00:00:{i:02d}Z") for i in range(count)])


# -- repositories ---------------------------------------------------------------------------------


def test_a_commit_stores_its_blocks_as_one_pack(make_store: Callable[[], ObjectStore], tmp_path: Path) -> None:
    store = make_store()
    with Repository(store, tmp_path / "index-a") as repo:
        extend(repo.dataset("packed"), 100)
        extend(repo.dataset("packed"), 3)
        written = chain_of(repo, "packed")
    assert len(written) == 104
    assert len(keys(store, pack_prefix("packed"))) == 2  # one per commit, however many blocks
    assert keys(store, block_prefix("packed")) == []
    with Repository(make_store(), tmp_path / "index-b") as fresh:  # an empty index rebuilds from the packs
        assert chain_of(fresh, "packed") == written


def test_a_repository_from_before_packs_is_read_extended_and_repacked(
    make_store: Callable[[], ObjectStore], tmp_path: Path
) -> None:
    store = make_store()
    old = old_layout(store, "legacy", 20)
    with Repository(make_store(), tmp_path / "index-a") as repo:
        assert chain_of(repo, "legacy") == [(b.hash, b.data) for b in old]
        extend(repo.dataset("legacy"), 2)  # the new blocks go into a pack next to the old objects
        extended = chain_of(repo, "legacy")
    assert (len(keys(store, block_prefix("legacy"))), len(keys(store, pack_prefix("legacy")))) == (21, 1)
    with Repository(make_store(), tmp_path / "index-b") as both:  # read from both layouts
        assert chain_of(both, "legacy") == extended
        replaced = keys(store, block_prefix("legacy")) + keys(store, pack_prefix("legacy"))
        report = collect_garbage(make_store(), grace_seconds=3600, repack=True)
        # what the one new pack holds goes at once, grace or not: nothing needs it any more
        assert len(report.written) == 1 and report.too_young == 0
        assert sorted(report.deleted) == sorted(replaced)
        assert keys(store, block_prefix("legacy")) == []
        assert keys(store, pack_prefix("legacy")) == report.written
        assert chain_of(both, "legacy") == extended  # an index synced before the repack keeps serving
    with Repository(make_store(), tmp_path / "index-c") as fresh:
        assert chain_of(fresh, "legacy") == extended
    assert len(keys(store, f"legacy/{ObjectKind.DATA.value}/")) == 20  # referenced objects stay
    again = collect_garbage(make_store(), grace_seconds=3600, repack=True)
    assert again.written == [] and again.deleted == []  # already one pack


def test_gc_collects_packs_no_chain_needs(make_store: Callable[[], ObjectStore], tmp_path: Path) -> None:
    store = make_store()
    with Repository(store, tmp_path / "index") as repo:
        dataset = repo.dataset("gc")
        extend(dataset, 3)
        extend(dataset, 3)
        tip = dataset.require_tip()
        live = keys(store, pack_prefix("gc"))
        # a push that never committed: its pack holds blocks on no chain, and the data they reference
        payload = os.urandom(64)
        store.put(object_key("gc", ObjectKind.DATA, Multihash.of(payload)), payload)
        event = AddData(DataSlice(Multihash.of(payload), 64, OffsetInterval(0, 0), 1))
        dataset.store_blocks([NewBlock.of(MetadataBlock(tip.sequence_number + 1, tip.head, utc_now(), event))])
        abandoned = sorted(set(keys(store, pack_prefix("gc"))) - set(live))
        # a block uploaded on its own (REST) that a pack holds too
        head_block = dataset.block_bytes(tip.head)
        assert dataset.blocks.write_single(tip.head, head_block)
    young = collect_garbage(store, grace_seconds=3600)
    # the young pack stays, and so does the data its blocks reference; the redundant single block goes
    assert young.deleted == [block_key("gc", tip.head)] and (young.too_young, young.kept) == (1, 3)
    done = collect_garbage(store, grace_seconds=0)
    assert sorted(done.deleted) == sorted([*abandoned, object_key("gc", ObjectKind.DATA, Multihash.of(payload))])
    assert sorted(keys(store, pack_prefix("gc"))) == sorted(live)
    with Repository(make_store(), tmp_path / "fresh") as fresh:
        assert fresh.dataset("gc").require_tip() == tip


def test_gc_keeps_a_young_single_block_that_only_an_off_chain_part_of_a_pack_holds(
    make_store: Callable[[], ObjectStore], tmp_path: Path
) -> None:
    store = make_store()
    with Repository(store, tmp_path / "index") as repo:
        extend(repo.dataset("rewound"), 3)
        (_, first), *_, (last_hash, last) = chain_of(repo, "rewound")
    # head moved back (a forced rewind): the pack stays for the chain, its last block is off it, and
    # a REST push is uploading that block again right now
    seed_hash = Multihash.of(first)
    assert store.compare_and_swap(head_key("rewound"), str(last_hash).encode(), str(seed_hash).encode())
    assert DatasetBlocks(store, DatasetName("rewound")).write_single(last_hash, last)
    young = collect_garbage(store, grace_seconds=3600)
    assert block_key("rewound", last_hash) not in young.deleted and young.too_young >= 1
    assert block_key("rewound", last_hash) in collect_garbage(store, grace_seconds=0).deleted


class RepackOnFirstPackRead(LocalStore):
    """A store in which another process repacks every dataset the moment a pack is first read through
    it: whatever listed the packs just before now holds a stale listing."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.repacked: list[str] = []

    def get(self, key: str) -> bytes:
        if not self.repacked and "/packs/" in key:
            self.repacked = collect_garbage(LocalStore(self.root), grace_seconds=3600, repack=True).written
            assert self.repacked and not self.exists(key)  # the pack about to be read is gone
        return super().get(key)


def three_commits(root: Path, index: Path) -> list[tuple[Multihash, bytes]]:
    with Repository(LocalStore(root), index) as repo:
        for _ in range(3):
            extend(repo.dataset("raced"), 4)
        assert len(keys(LocalStore(root), pack_prefix("raced"))) == 3
        return chain_of(repo, "raced")


def test_a_reader_that_listed_the_packs_before_a_repack_finds_the_blocks_in_the_new_pack(tmp_path: Path) -> None:
    written = three_commits(tmp_path / "store", tmp_path / "index-a")
    racing = RepackOnFirstPackRead(tmp_path / "store")
    with Repository(racing, tmp_path / "index-b") as fresh:  # an empty index reads the packs
        assert chain_of(fresh, "raced") == written
    assert keys(racing, pack_prefix("raced")) == racing.repacked


def test_gc_that_listed_the_packs_before_another_repack_finishes_and_keeps_the_chain(tmp_path: Path) -> None:
    written = three_commits(tmp_path / "store", tmp_path / "index-a")
    racing = RepackOnFirstPackRead(tmp_path / "store")
    report = collect_garbage(racing, grace_seconds=0)  # no false "block missing" and nothing lost
    assert report.datasets == 1 and report.deleted == []
    with Repository(LocalStore(tmp_path / "store"), tmp_path / "index-c") as fresh:
        assert chain_of(fresh, "raced") == written


def test_packs_are_checked_and_read_block_by_block(make_store: Callable[[], ObjectStore], tmp_path: Path) -> None:
    store = make_store()
    with Repository(store, tmp_path / "index") as repo:
        dataset = repo.dataset("ranged")
        extend(dataset, 30)
        blocks = chain_of(repo, "ranged")
        (pack,) = keys(store, pack_prefix("ranged"))
        for address, data in blocks:  # random access through the pack's own index: ranged reads
            assert dataset.blocks.find_in(pack, address) == data
        assert dataset.blocks.find_in(pack, Multihash.of(b"elsewhere")) is None
    # a pack whose index names a block by another hash is refused, even though the pack's own hash is right
    lying = encode_pack([(Multihash.of(b"x"), blocks[1][1])])
    store.put(pack_key("ranged", Multihash.of(lying)), lying)
    with Repository(make_store(), tmp_path / "fresh") as fresh, pytest.raises(CorruptRepository, match="does not"):
        fresh.dataset("ranged").require_tip()


def test_a_workspace_keeps_pulled_blocks_in_one_pack_and_one_from_before_packs_still_pushes(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    old_ws = tmp_path / "old"
    with Workspace(old_ws) as workspace:  # a workspace written before packs: one file per block
        blocks = old_layout(workspace.local_store, dataset_name, 12)
    url = f"{smart_server.url}/{dataset_name}"
    pushed = summary(run_cli("push", dataset_name, url, "--json", workspace=old_ws))
    assert (pushed["blocks"], pushed["objects_transferred"], pushed["new_head"]) == (13, 12, str(blocks[-1].hash))
    assert summary(run_cli("verify", dataset_name, "--json", workspace=old_ws))["ok"]
    pulled = summary(run_cli("pull", url, "--json", workspace=tmp_path / "new"))
    assert (pulled["blocks"], pulled["new_head"]) == (13, str(blocks[-1].hash))
    stored = tmp_path / "new" / "store" / dataset_name
    assert len(list((stored / "packs").iterdir())) == 1 and not (stored / "blocks").exists()
    assert summary(run_cli("verify", dataset_name, "--json", workspace=tmp_path / "new"))["ok"]


# -- servers ----------------------------------------------------------------------------------------


def server_store(server: ServerProcess, request: pytest.FixtureRequest) -> ObjectStore:
    """The server's own store, reached from the test."""
    if server.backend == "local":
        return LocalStore(server.root / "store")
    s3_env = request.getfixturevalue("s3_env")
    prefix = next(str(a) for a in server.process.args if str(a).startswith("srv-"))  # type: ignore[union-attr]
    return S3Store(s3_env.bucket, prefix, endpoint_url=s3_env.endpoint)


def store_puts(server: ServerProcess) -> int:
    """PUTs the server made to S3 so far (its /metrics)."""
    text = httpx.get(f"{server.url}/metrics").text
    prefix = 'smart_transfer_store_seconds_count{operation="PutObject"}'
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines() if line.startswith(prefix))


def test_a_push_of_n_objects_costs_n_storage_writes_and_a_constant(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    ws, url = tmp_path / "ws", f"{smart_server.url}/{dataset_name}"
    store = server_store(smart_server, request)
    try:
        for count in (40, 5):
            run_cli("add", dataset_name, *map(str, make_files(tmp_path / f"in{count}", count, 300)), workspace=ws)
            before = store_puts(smart_server)
            pushed = summary(run_cli("push", dataset_name, url, "--json", workspace=ws))
            assert (pushed["blocks"], pushed["objects_transferred"]) == (count + (1 if count == 40 else 0), count)
            if smart_server.backend == "s3":  # the pack, and head's record and copy; never one per block
                assert store_puts(smart_server) - before == 3
        assert len(keys(store, pack_prefix(dataset_name))) == 2
        assert keys(store, block_prefix(dataset_name)) == []
        assert len(keys(store, f"{dataset_name}/data/")) == 45
    finally:
        store.close()


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _simple_get(url: str) -> bytes:
    response = httpx.get(url)
    assert response.status_code == 200, response.text
    return response.content


def test_the_simple_protocol_serves_single_blocks_out_of_packs(
    server_factory: Callable[..., ServerProcess],
    backend: str,
    dataset_name: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    extra = backend_args(backend, request.getfixturevalue("s3_env") if backend == "s3" else None)
    server = server_factory(*extra, root=tmp_path / "root")
    server.backend = backend
    ws = tmp_path / "ws"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 5, 100)), workspace=ws)
    assert run_cli("push", dataset_name, f"{server.url}/{dataset_name}", workspace=ws).returncode == 0
    with Workspace(ws, read_only=True) as workspace:
        blocks = chain_of(workspace, dataset_name)
    # blocks of a pack no chain references yet (a push in flight): found through the pack's index
    tip = MetadataBlock(len(blocks), blocks[-1][0], utc_now(), AddData(new_watermark="2024-02-01T00:00:00Z"))
    pending = NewBlock.of(tip)
    store = server_store(server, request)
    try:
        DatasetBlocks(store, DatasetName(dataset_name)).write([(pending.hash, pending.data)])
    finally:
        store.close()
    for attempt in ("warm", "cold"):
        if attempt == "cold":  # a server with an empty index on the same store reads the packs
            server.stop()
            for index in server.root.glob("index*"):
                shutil.rmtree(index)
            server = server_factory(*extra, root=tmp_path / "root")
        for address, data in [*blocks, (pending.hash, pending.data)]:
            assert _simple_get(f"{server.url}/{dataset_name}/blocks/{address}") == data
        missing = httpx.get(f"{server.url}/{dataset_name}/blocks/{Multihash.of(b'none')}")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "BlockNotFound"


@pytest.fixture
def old_server(
    server_factory: Callable[..., ServerProcess], backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[ServerProcess, list[str], list[NewBlock]]]:
    """A server started on a store holding a dataset ``legacy`` written before packs, and the
    ``gc``/``repack`` store options that reach that store."""
    s3 = request.getfixturevalue("s3_env") if backend == "s3" else None
    extra = backend_args(backend, s3)
    root = tmp_path / "root"
    store: ObjectStore = LocalStore(root / "store")
    store_args = ["--root", str(root), *extra]
    if s3 is not None:
        store = S3Store(s3.bucket, extra[-1], endpoint_url=s3.endpoint)
    try:
        blocks = old_layout(store, "legacy", 8)
    finally:
        store.close()
    server = server_factory(*extra, root=root)
    server.backend = backend
    yield server, store_args, blocks


def _pulled(url: str, workspace: Path, *extra: str) -> dict[str, object]:
    result = summary(run_cli("pull", url, "--json", *extra, workspace=workspace))
    assert summary(run_cli("verify", "legacy", "--json", workspace=workspace))["ok"]
    return result


def test_pulls_and_pushes_work_on_a_repository_from_before_packs_and_after_its_repack(
    old_server: tuple[ServerProcess, list[str], list[NewBlock]], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    server, store_args, blocks = old_server
    url = f"{server.url}/legacy"
    for protocol in ("smart", "simple"):
        pulled = _pulled(url, tmp_path / f"pull-{protocol}", "--protocol", protocol)
        assert (pulled["blocks"], pulled["objects_transferred"], pulled["new_head"]) == (9, 8, str(blocks[-1].hash))
    writer = tmp_path / "pull-smart"
    for protocol in ("smart", "simple"):
        run_cli("add", "legacy", *map(str, make_files(tmp_path / protocol, 2, 50, protocol)), workspace=writer)
        assert run_cli("push", "legacy", url, "--protocol", protocol, workspace=writer).returncode == 0
    store = server_store(server, request)
    try:
        # the smart push wrote one pack, the simple one uploaded its blocks one by one and then packed them
        assert (len(keys(store, pack_prefix("legacy"))), len(keys(store, block_prefix("legacy")))) == (2, 9 + 2)
        result = subprocess.run([*CLI, "repack", *store_args, "--json"], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        report = orjson.loads(result.stdout)
        assert len(report["written"]) == 1 and len(report["deleted"]) == 2 + 9 + 2
        assert keys(store, pack_prefix("legacy")) == report["written"] and keys(store, block_prefix("legacy")) == []
    finally:
        store.close()
    head = summary(run_cli("pull", url, "--json", workspace=writer))["new_head"]  # the running server: its index
    for protocol in ("smart", "simple"):
        pulled = _pulled(url, tmp_path / f"after-{protocol}", "--protocol", protocol)
        assert (pulled["blocks"], pulled["new_head"]) == (13, head)
    run_cli("add", "legacy", *map(str, make_files(tmp_path / "last", 1, 50, "last")), workspace=writer)
    assert run_cli("push", "legacy", url, workspace=writer).returncode == 0
    assert _pulled(url, tmp_path / "after-smart")["blocks"] == 1
