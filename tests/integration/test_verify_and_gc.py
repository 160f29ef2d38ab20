"""verify names what is broken and where histories part; a following pull repairs; gc removes only
what failed pushes left behind, and only after the grace period."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, ServerProcess, make_files, run_cli
from tests.integration.test_resume_and_expiry import kill_when, remote_objects


def verify(workspace: Path, name: str, *url: str) -> tuple[int, dict[str, object]]:
    result = run_cli("verify", name, *url, "--json", workspace=workspace)
    assert "Traceback" not in result.stderr
    return result.returncode, orjson.loads(result.stdout)


def test_verify_finds_damage_and_a_pull_repairs_it(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "in", 3, 4000)), workspace=a)
    assert run_cli("push", dataset_name, url, workspace=a).returncode == 0
    assert run_cli("pull", url, workspace=b).returncode == 0
    code, report = verify(b, dataset_name, url)
    assert (code, report["ok"], report["relation"], report["objects_checked"]) == (0, True, "same", 3)

    data = sorted((b / "store" / dataset_name / "data").iterdir())
    data[0].write_bytes(b"x" * 4000)  # same size, other bytes
    data[1].unlink()
    code, report = verify(b, dataset_name)
    assert code == 1 and not report["ok"]
    problems = "\n".join(report["problems"])  # type: ignore[arg-type]
    assert f"data/{data[0].name}: corrupt" in problems and f"data/{data[1].name}: missing" in problems
    assert report["quarantined"] == [f"data/{data[0].name}"]

    repaired = orjson.loads(run_cli("pull", url, "--json", workspace=b).stdout)
    assert (repaired["objects_repaired"], repaired["objects_transferred"], repaired["blocks"]) == (2, 2, 0)
    assert verify(b, dataset_name)[0] == 0

    # where histories part
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "more", 1, 10, "a")), workspace=a)
    assert run_cli("push", dataset_name, url, workspace=a).returncode == 0
    assert verify(b, dataset_name, url)[1]["relation"] == "remote-ahead"
    run_cli("add", dataset_name, *map(str, make_files(tmp_path / "other", 2, 10, "b")), workspace=b)
    code, report = verify(b, dataset_name, url)
    assert code == 3
    assert (report["relation"], report["common_block"]) == ("diverged", 3)
    assert (report["local_only_blocks"], report["remote_only_blocks"]) == (2, 1)
    assert verify(a, dataset_name, url)[1]["relation"] == "same"
    text = run_cli("verify", dataset_name, url, workspace=b)
    assert "diverged from the remote after block 3" in text.stdout


def test_gc_removes_only_orphans_older_than_the_grace_period(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    committed, abandoned = f"{dataset_name}-kept", f"{dataset_name}-gone"
    a = tmp_path / "a"
    run_cli("add", committed, *map(str, make_files(tmp_path / "in", 5, 2000)), workspace=a)
    assert run_cli("push", committed, f"{smart_server.url}/{committed}", workspace=a).returncode == 0
    run_cli("add", abandoned, *map(str, make_files(tmp_path / "in2", 60, 16_384, "g")), workspace=a)
    push = ["push", abandoned, f"{smart_server.url}/{abandoned}", "--limit-rate", "300K", "--parallel", "4"]
    kill_when(push, a, lambda: remote_objects(smart_server, request, abandoned) >= 5)
    orphans = remote_objects(smart_server, request, abandoned)
    assert orphans >= 5

    s3 = request.getfixturevalue("s3_env") if smart_server.backend == "s3" else None
    store_args = ["--root", str(smart_server.root)]
    if s3 is not None:
        prefix = next(str(x) for x in smart_server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
        store_args += ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-prefix", prefix]

    def gc(*args: str) -> dict[str, object]:
        result = subprocess.run([*CLI, "gc", *store_args, "--json", *args], capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        return orjson.loads(result.stdout)  # type: ignore[no-any-return]

    young = gc("--grace", "1h")
    # the abandoned push's pack is young, so the data its blocks reference stays too
    assert young["deleted"] == [] and young["too_young"] >= 1
    dry = gc("--grace", "0", "--dry-run")
    mine = [k for k in dry["deleted"] if str(k).startswith(f"{abandoned}/")]  # type: ignore[union-attr]
    assert len([k for k in mine if "/data/" in str(k)]) == orphans
    # the pack of blocks the abandoned push wrote early (never on a chain) goes too; no other kind of key does
    assert {str(k).split("/")[1] for k in mine} == {"data", "packs"}
    assert not any(str(k).startswith(f"{committed}/") for k in dry["deleted"])  # type: ignore[union-attr]
    assert remote_objects(smart_server, request, abandoned) == orphans  # dry run deleted nothing
    # one dataset at a time: the committed one alone has nothing to delete, the abandoned one alone all of it
    only_kept = gc("--grace", "0", "--dry-run", "--dataset", committed)
    assert (only_kept["datasets"], only_kept["deleted"]) == (1, [])
    only_gone = gc("--grace", "0", "--dry-run", "--dataset", abandoned)
    assert (only_gone["datasets"], set(only_gone["deleted"])) == (1, set(mine))  # type: ignore[arg-type]
    typo = subprocess.run(
        [*CLI, "gc", *store_args, "--dataset", f"{dataset_name}-typo"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert typo.returncode == 1 and typo.stderr.count("\n") == 1 and "no dataset" in typo.stderr
    bad = subprocess.run([*CLI, "gc", *store_args, "--dataset", "../x"], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    done = gc("--grace", "0")
    assert {k for k in done["deleted"] if str(k).startswith(f"{abandoned}/")} == set(mine)  # type: ignore[union-attr]
    assert remote_objects(smart_server, request, abandoned) == 0
    # everything referenced survived: a fresh pull of the committed dataset still verifies
    assert run_cli("pull", f"{smart_server.url}/{committed}", workspace=tmp_path / "b").returncode == 0
    assert verify(tmp_path / "b", committed)[0] == 0
    # and the abandoned push simply starts over
    assert run_cli("push", abandoned, f"{smart_server.url}/{abandoned}", workspace=a).returncode == 0


def test_objects_of_a_rewritten_history_are_collected_and_uploaded_again(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    files = make_files(tmp_path / "in", 3, 1000)
    run_cli("add", dataset_name, str(files[0]), workspace=a)
    assert run_cli("push", dataset_name, url, workspace=a).returncode == 0
    assert run_cli("pull", url, workspace=b).returncode == 0
    run_cli("add", dataset_name, str(files[1]), workspace=a)
    assert run_cli("push", dataset_name, url, workspace=a).returncode == 0
    # B rewrites history without A's second file, and gc collects what the old history referenced
    run_cli("add", dataset_name, str(files[2]), workspace=b)
    assert run_cli("push", dataset_name, url, "--force", workspace=b).returncode == 0
    s3 = request.getfixturevalue("s3_env") if smart_server.backend == "s3" else None
    store_args = ["--root", str(smart_server.root)]
    if s3 is not None:
        prefix = next(str(x) for x in smart_server.process.args if str(x).startswith("srv-"))  # type: ignore[union-attr]
        store_args += ["--s3-endpoint", s3.endpoint, "--s3-bucket", s3.bucket, "--s3-prefix", prefix]
    gc = subprocess.run(
        [*CLI, "gc", *store_args, "--grace", "0", "--json"], capture_output=True, text=True, check=False
    )
    assert gc.returncode == 0, gc.stderr
    collected = [k for k in orjson.loads(gc.stdout)["deleted"] if "/data/" in k]
    assert len(collected) == 1  # A's second file: referenced only by the replaced history
    # A forces its history back: the server must not believe it still has that object
    pushed = orjson.loads(run_cli("push", dataset_name, url, "--force", "--json", workspace=a).stdout)
    assert pushed["objects_transferred"] >= 1
    assert run_cli("pull", url, workspace=tmp_path / "c").returncode == 0
    assert verify(tmp_path / "c", dataset_name, url)[1]["relation"] == "same"
    assert verify(tmp_path / "c", dataset_name)[0] == 0


@pytest.mark.parametrize("extra", [[], ["--dry-run", "--dataset", "sales"]])
def test_gc_refuses_a_root_without_a_store_and_creates_nothing(tmp_path: Path, extra: list[str]) -> None:
    # a mistyped --root used to leave an empty store directory behind (found by the CLI fuzzer)
    root = tmp_path / "typo"
    result = subprocess.run(
        [*CLI, "gc", "--root", str(root), *extra], capture_output=True, text=True, check=False, cwd=tmp_path
    )
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and "no store in" in result.stderr
    assert sorted(tmp_path.iterdir()) == []
