"""Paged checkpoint manifests end to end, on the embedded store and on S3, over both protocols: a
10-file change moves only the pages around it (and the files), a 20,000-file checkpoint pushes,
pulls and verifies, repositories written with format-1 manifests still sync, and a push whose
tarball leaves out a page the server lacks is refused with one clear error and changes nothing.

Checkpoints are made through the checkpoint API (``store_checkpoint`` of a directory, then an AddData
block naming it), as ingest does after its Spark job: a RocksDB-like directory of numbered SST files
and RocksDB's small files, without running Spark (``tests/spark`` covers real ingests)."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from smart_transfer.checkpoint.files import StoredCheckpoint, store_checkpoint, store_manifest
from smart_transfer.checkpoint.slot import CheckpointSlot
from smart_transfer.client import SyncClient
from smart_transfer.client.flows import pull as pull_flow
from smart_transfer.client.flows import push as push_flow
from smart_transfer.client.flows.push import local_bundle
from smart_transfer.client.inspection.verify import verify_local
from smart_transfer.errors import SmartTransferError
from smart_transfer.ingest.api import IngestError, _installed_checkpoint
from smart_transfer.ingest.schema import chain_state
from smart_transfer.model import Multihash, ObjectKind
from smart_transfer.model.events import AddData, Checkpoint
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, build_manifest
from smart_transfer.repo import Workspace
from smart_transfer.repo import dataset as dataset_module
from smart_transfer.repo.layout import object_key
from smart_transfer.repo.page_cache import PageCache
from smart_transfer.sync.plan import plan_pull
from tests.conftest import CLI, S3Env, ServerProcess, backend_args, store_calls
from tests.scale import RUNTIME_FILES, commit_checkpoint, sst_names, ten_rows_changed, write_checkpoint


def manifest_objects(manifest: CheckpointManifest, held: CheckpointManifest | None) -> tuple[int, int]:
    """How many manifest objects (pages, root included) ``manifest`` adds to ``held``, and their bytes."""
    old = {h for h, _ in held.all_pages()} if held is not None else set()
    new = [data for page, data in manifest.all_pages() if page not in old]
    return len(new), sum(len(d) for d in new)


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_a_ten_file_change_moves_the_pages_around_it(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    names = sorted([*sst_names(1020), *RUNTIME_FILES])  # 1,024 files
    changed = ten_rows_changed(names)
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        first = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c1", names, "1"))
        head1 = a.dataset(dataset_name).require_tip()
        with SyncClient(a, protocol=protocol) as client:
            pushed = client.push(dataset_name, url)
        assert pushed.objects_transferred == first.pages + first.files == len(first.manifest.all_pages()) + 1024
        with SyncClient(b, protocol=protocol) as client:  # the pages came in the metadata: the files follow
            assert client.pull(url).objects_transferred == 1024

        second = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c2", changed, "2"))
        dataset = a.dataset(dataset_name)
        pages, page_bytes = manifest_objects(second.manifest, first.manifest)
        assert second.pages == pages and second.files == 14  # 10 new SST files and RocksDB's 4 small files
        whole = len(CheckpointManifest(second.manifest.files).encode())  # the format-1 manifest (main)
        # the metadata tarballs carry exactly the new pages, both ways
        tarball_push = local_bundle(dataset, dataset.require_tip(), head1.head).pages()
        tarball_pull = plan_pull(dataset, head1.head, None, False, []).manifests
        assert tarball_push == tarball_pull
        assert sum(len(d) for d in tarball_push.values()) == page_bytes < whole // 2
        print(f"\n10 of 1,024 files changed: manifest pages {pages} objects, {page_bytes} bytes (format 1: {whole})")

        with SyncClient(a, protocol=protocol) as client:
            incremental = client.push(dataset_name, url)
        assert incremental.objects_transferred == pages + second.files
        assert incremental.bytes_transferred == page_bytes + second.bytes
        with SyncClient(b, protocol=protocol) as client:
            pulled = client.pull(url)
        assert pulled.objects_transferred == second.files and pulled.bytes_transferred == second.bytes
        report, _ = verify_local(b, dataset_name)
        assert report.ok, report.problems
        restored = CheckpointSlot(b.root, dataset_name).current
        assert restored is not None and sorted(p.name for p in restored.iterdir()) == changed


@pytest.mark.timeout(900)
def test_a_twenty_thousand_file_checkpoint_pushes_pulls_and_verifies(
    s3_env: S3Env, server_factory: Callable[..., ServerProcess], dataset_name: str, tmp_path: Path
) -> None:
    """On S3 only: 40,000 object transfers are the cost here, and the paging logic is the store's on both
    (the 1,024-file tests above run on both stores); on the embedded store every byte would also pass
    through the server, which only makes the test slower."""
    server = server_factory(*backend_args("s3", s3_env))
    url = f"{server.url}/{dataset_name}"
    names = sorted([*sst_names(19_996), *RUNTIME_FILES])
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        first = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c1", names, "1"))
        assert len(first.manifest.files) == 20_000 and first.pages == len(first.manifest.all_pages())
        with SyncClient(a) as client:
            pushed = client.push(dataset_name, url)
        assert pushed.objects_transferred == 20_000 + first.pages
        # negotiation and commit list the checkpoint files (a page per 1,000) instead of a HEAD each
        calls = store_calls(server)
        assert calls["HeadObject"] < 1_000 and 0 < calls["ListObjectsV2"] < 20_000 // 8, calls
        with SyncClient(b) as client:
            assert client.pull(url).objects_transferred == 20_000
        second = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c2", ten_rows_changed(names), "2"))
        with SyncClient(a) as client:
            changed = client.push(dataset_name, url)
        assert changed.objects_transferred == second.files + second.pages
        # offered: the files and pages around the change, not the 20,000 files the server holds
        assert changed.objects_skipped < 20 * (second.files + second.pages), changed.objects_skipped
        with SyncClient(b) as client:
            assert client.pull(url).objects_transferred == second.files
        assert second.pages < first.pages // 20
        report, _ = verify_local(b, dataset_name)
        every_object = 20_000 + second.files + first.pages + second.pages  # of both checkpoints
        assert report.ok and report.objects_checked == every_object, report.problems
        restored = CheckpointSlot(b.root, dataset_name).current
        assert restored is not None and len(list(restored.iterdir())) == 20_000


@pytest.mark.parametrize("protocol", ["smart", "simple"])
def test_format_one_manifests_still_sync_and_verify(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, protocol: str
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    names = sorted([*sst_names(200), *RUNTIME_FILES])
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        dataset = a.dataset(dataset_name)
        directory = write_checkpoint(tmp_path / "c1", names, "1")
        paged = store_checkpoint(dataset, directory).manifest
        old = CheckpointManifest(paged.files)  # written as before paged manifests
        store_manifest(dataset, old)
        dataset.append([AddData(new_checkpoint=Checkpoint(old.hash(), len(old.encode())))])
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, url)
        with SyncClient(b, protocol=protocol) as client:
            assert client.pull(url).objects_transferred == len(names)  # the manifest came in the metadata
        assert verify_local(b, dataset_name)[0].ok
        # a paged checkpoint on top of a format-1 one: every page moves (nothing to share)
        second = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c2", ten_rows_changed(names), "2"))
        with SyncClient(a, protocol=protocol) as client:
            client.push(dataset_name, url)
        with SyncClient(b, protocol=protocol) as client:
            assert client.pull(url).objects_transferred == second.files
        report, _ = verify_local(b, dataset_name)
        assert report.ok, report.problems
        restored = CheckpointSlot(b.root, dataset_name).current
        assert restored is not None and len(list(restored.iterdir())) == len(ten_rows_changed(names))


@contextlib.contextmanager
def synced(tmp_path: Path, name: str, url: str, ssts: int) -> Iterator[tuple[Workspace, Workspace, StoredCheckpoint]]:
    """Workspaces ``a`` and ``b``: a checkpoint of ``ssts`` SST files (and RocksDB's own files) committed
    in ``a``, pushed to ``url`` and pulled into ``b``."""
    names = sorted([*sst_names(ssts), *RUNTIME_FILES])
    with Workspace(tmp_path / "a") as a, Workspace(tmp_path / "b") as b:
        stored = commit_checkpoint(a, name, write_checkpoint(tmp_path / "c1", names, "1"))
        with SyncClient(a) as client:
            client.push(name, url)
        with SyncClient(b) as client:
            client.pull(url)
        yield a, b, stored


def test_a_lost_page_is_reported_then_fetched_again(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    with synced(tmp_path, dataset_name, url, 300) as (_, b, stored):
        monkeypatch.setattr(dataset_module, "PAGES", PageCache(0))  # no page read before is remembered
        lost = stored.manifest.all_pages()[1][0]
        b.local_store.path_of(object_key(dataset_name, ObjectKind.CHECKPOINT, lost)).unlink()
        report, _ = verify_local(b, dataset_name)
        assert not report.ok and any(f"page {lost} is missing" in p for p in report.problems), report.problems
        with SyncClient(b) as client:
            assert client.pull(url).objects_repaired == 1
        # the files below a lost page are known once it is back: the mark stays for the next pull
        assert b.lost.seen(dataset_name)
        with SyncClient(b) as client:
            assert client.pull(url).objects_repaired == 0
        assert not b.lost.seen(dataset_name)
        report, _ = verify_local(b, dataset_name)
        assert report.ok, report.problems


def test_a_pulled_checkpoint_links_its_sst_files_and_a_repair_installs_it_again(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # restoring a checkpoint copied every file: a 10-row change to a state of hundreds of GiB copied it all
    url = f"{smart_server.url}/{dataset_name}"
    with synced(tmp_path, dataset_name, url, 40) as (_, b, stored):
        installed = CheckpointSlot(b.root, dataset_name).current
        objects = {
            f.name: b.local_store.path_of(object_key(dataset_name, ObjectKind.CHECKPOINT, f.physical_hash))
            for f in stored.manifest.files
        }
        shared = {name for name, path in objects.items() if (installed / name).samefile(path)}
        assert shared == set(sst_names(40))  # SST files are links to their objects; RocksDB's own files copies
        assert all((installed / name).read_bytes() == name.encode() for name in sst_names(40))

        victim = objects["000007.sst"]
        victim.write_bytes(b"x" * victim.stat().st_size)  # damage in place reaches the installed file too
        report, _ = verify_local(b, dataset_name)
        assert report.quarantined == [f"checkpoints/{stored.manifest.files[7].physical_hash}"]
        assert b.lost.seen(dataset_name)
        with pytest.raises(IngestError, match="pull it first"):  # it would continue from the damaged state
            _installed_checkpoint(b, b.dataset(dataset_name), chain_state(b.dataset(dataset_name)))

        def killed(*_: object) -> None:
            raise KeyboardInterrupt  # the pull dies after its commit, before it checked the installation

        monkeypatch.setattr(pull_flow, "install_checked", killed)
        with SyncClient(b) as client, pytest.raises(KeyboardInterrupt):
            client.pull(url)
        assert b.lost.seen(dataset_name)  # still marked: the next pull checks again
        monkeypatch.undo()
        with SyncClient(b) as client:
            assert client.pull(url).objects_repaired == 0  # fetched by the killed pull
        assert not b.lost.seen(dataset_name)
        installed = CheckpointSlot(b.root, dataset_name).current
        assert (installed / "000007.sst").read_bytes() == b"000007.sst"
        assert (installed / "000007.sst").samefile(objects["000007.sst"])
        assert len(list(installed.parent.glob("cp-*"))) == 1  # the damaged installation is gone
        assert verify_local(b, dataset_name)[0].ok


def test_a_tarball_without_a_page_the_server_lacks_is_refused(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    names = sorted([*sst_names(300), *RUNTIME_FILES])
    with Workspace(tmp_path / "a") as a:
        stored = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c1", names, "1"))
        below_root = {page for page, _ in stored.manifest.all_pages()[1:]}

        def wrongly_held(*_: object) -> set[Multihash]:
            return below_root  # a client that thinks the server holds every page below the root

        monkeypatch.setattr(push_flow, "held_pages", wrongly_held)
        with SyncClient(a) as client, pytest.raises(SmartTransferError) as refused:
            client.push(dataset_name, url)
        assert "is neither sent nor held" in str(refused.value)
        assert str(stored.manifest.hash()) in str(refused.value)
        with SyncClient(a) as client:
            assert client.status(dataset_name, url).remote_head is None  # nothing changed
        monkeypatch.undo()
        with SyncClient(a) as client:
            assert client.push(dataset_name, url).objects_transferred == len(names) + stored.pages


def test_gc_keeps_every_page_of_a_kept_checkpoint_and_collects_an_orphan_page(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = f"{smart_server.url}/{dataset_name}"
    names = sorted([*sst_names(300), *RUNTIME_FILES])
    with Workspace(tmp_path / "a") as a:
        first = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c1", names, "1"))
        second = commit_checkpoint(a, dataset_name, write_checkpoint(tmp_path / "c2", ten_rows_changed(names), "2"))
        with SyncClient(a) as client:
            client.push(dataset_name, url)
    orphan = build_manifest([CheckpointFile("orphan.sst", Multihash.of(b"x"), 1, True)]).encode()  # named by none
    staged = httpx.put(f"{url}/checkpoints/{Multihash.of(orphan)}", content=orphan)
    assert staged.status_code in (201, 202), staged.text
    store_args = ["--root", str(smart_server.root)]
    if smart_server.backend == "s3":
        s3 = request.getfixturevalue("s3_env")
        prefix = next(str(x) for x in smart_server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
        store_args += ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-prefix", prefix]
    gc = [*CLI, "gc", *store_args, "--json", "--grace", "0", "--dry-run"]
    result = subprocess.run(gc, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    mine = [k for k in orjson.loads(result.stdout)["deleted"] if k.startswith(f"{dataset_name}/")]
    assert mine == [f"{dataset_name}/checkpoints/{Multihash.of(orphan)}"]  # every page of both checkpoints stays
    assert len(first.manifest.all_pages()) > 10 and second.pages > 1
