"""What ``export`` writes to: a regular file is replaced atomically; a character device or a FIFO is written
in place and never replaced; a symlink is followed (the link stays); anything else, and any failed write
(a full device), is one error line naming the user's path, exit 1, with nothing left behind."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, run_cli
from tests.slices import add_slices

NAME = "sales"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    add_slices(ws, NAME, tmp_path / "in", [50, 50])
    return ws


def _export(workspace: Path, out: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("export", NAME, out, "--format", "jsonl", *extra, workspace=workspace, timeout=60)


def _one_error(result: subprocess.CompletedProcess[str], fragment: str, code: int = 1) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and fragment in lines[0] and ".tmp" not in lines[0], lines


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_character_device_is_written_in_place_and_stays_a_device(workspace: Path, tmp_path: Path) -> None:
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    result = _export(workspace, str(device))
    assert result.returncode == 0, result.stderr
    assert "exported 100 record(s)" in result.stdout
    assert stat.S_ISCHR(device.lstat().st_mode) and _leftovers(tmp_path) == []


def test_a_full_device_is_an_error_naming_the_path(workspace: Path, tmp_path: Path) -> None:
    full = tmp_path / "full"
    os.mknod(full, stat.S_IFCHR | 0o666, os.makedev(1, 7))  # /dev/full: every write fails with ENOSPC
    result = _export(workspace, str(full))
    _one_error(result, f"cannot write {full}: No space left on device")
    assert stat.S_ISCHR(full.lstat().st_mode) and _leftovers(tmp_path) == []


def test_a_fifo_is_written_to_its_reader_and_stays_a_fifo(workspace: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    try:
        process = subprocess.Popen(
            [*CLI, "export", NAME, str(fifo), "--format", "jsonl", "--workspace", str(workspace)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, err = process.communicate(timeout=60)
    finally:
        reader.join(timeout=60)
    assert process.returncode == 0, err
    rows = [orjson.loads(line) for line in received[0].splitlines()]
    assert [r["offset"] for r in rows] == list(range(100))
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_fifo_nobody_reads_is_refused_at_once(workspace: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "lonely"
    os.mkfifo(fifo)
    _one_error(_export(workspace, str(fifo)), f"cannot write {fifo}: no process is reading this FIFO")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_symlink_is_followed_and_stays_a_link(workspace: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert _export(workspace, str(link)).returncode == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert len(real.read_text().splitlines()) == 100
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "created.jsonl")
    assert _export(workspace, str(dangling)).returncode == 0
    assert dangling.is_symlink() and len((tmp_path / "created.jsonl").read_text().splitlines()) == 100
    assert _leftovers(tmp_path) == []


def test_a_directory_and_unwritable_places_are_refused_naming_the_users_path(workspace: Path, tmp_path: Path) -> None:
    _one_error(_export(workspace, str(tmp_path)), f"cannot write {tmp_path}: it is a directory", 2)
    _one_error(_export(workspace, str(tmp_path / "no" / "x.jsonl")), "no such directory", 2)
    _one_error(_export(workspace, "/proc/x.jsonl"), "cannot write /proc/x.jsonl: cannot create a file in /proc")
    _one_error(_export(workspace, "/sys/x.jsonl"), "cannot write /sys/x.jsonl")


def test_dev_stdout_is_the_standard_output_whatever_it_is(workspace: Path) -> None:
    result = _export(workspace, "/dev/stdout")  # a pipe here: written in place, nothing replaced
    assert result.returncode == 0, result.stderr
    assert [orjson.loads(line)["offset"] for line in result.stdout.splitlines()[:100]] == list(range(100))


def test_a_regular_file_is_replaced_whole_or_not_at_all(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    target.write_text("keep me\n")
    bad = _export(workspace, str(target), "--offsets", "500-600")  # not within the dataset: refused first
    assert bad.returncode == 1 and target.read_text() == "keep me\n"
    target.chmod(0o640)
    assert _export(workspace, str(target)).returncode == 0
    assert len(target.read_text().splitlines()) == 100 and _leftovers(tmp_path) == []
    assert stat.S_IMODE(target.stat().st_mode) == 0o640  # the replaced file keeps its permissions


def test_a_redirected_dev_stdout_is_appended_to_never_replaced(workspace: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text("previous\n")
    with open(log, "a") as out:
        result = subprocess.run(
            [*CLI, "export", NAME, "/dev/stdout", "--format", "jsonl", "--workspace", str(workspace)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 0, result.stderr
    lines = log.read_text().splitlines()
    assert lines[0] == "previous" and [orjson.loads(x)["offset"] for x in lines[1:101]] == list(range(100))
    assert lines[101].startswith(f"{NAME}: exported 100 record(s)")  # the summary follows, on the same stdout


def test_a_reader_that_goes_away_is_not_an_error(workspace: Path) -> None:
    export = subprocess.Popen(
        [*CLI, "export", NAME, "-", "--format", "jsonl", "--workspace", str(workspace)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert export.stdout is not None and export.stderr is not None
    export.stdout.readline()
    export.stdout.close()  # as `| head -1` does
    assert export.wait(60) == 0
    assert export.stderr.read() == b""


@pytest.mark.parametrize("out", ["", "newdir/"])
def test_an_empty_path_or_one_ending_in_a_slash_is_refused_first(workspace: Path, tmp_path: Path, out: str) -> None:
    result = subprocess.run(
        [*CLI, "export", NAME, out, "--format", "jsonl", "--workspace", str(workspace)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "a file path is needed" in result.stderr
    assert not (tmp_path / "newdir").exists()
