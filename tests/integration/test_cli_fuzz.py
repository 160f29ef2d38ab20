"""A fuzzer for the command line (Hypothesis): every command and subcommand, with generated arguments
(valid and invalid dataset names, URLs of every scheme and shape, numbers at and past every declared bound,
unicode, empty strings, paths to devices, FIFOs, directories, symlinks and missing places), run as a user
runs them (a real process) against a real server and workspace. Each run must:

- exit 0, 1, 2 or 3 (a long-running command, ``serve`` or ``peer serve``, may also still be running);
- on failure, say exactly one line on stderr, never a traceback, never the catch-all "unexpected ...";
- when it fails, change nothing: the workspace, the server's store, the sandbox's files and the working
  and home directories are compared before and after;
- touch nothing outside the sandbox (the devices it is given are made there with mknod).

``SMART_TRANSFER_CLI_FUZZ_EXAMPLES`` sets the examples per command (``make test``: a few each; ``make
test-faults``: many more)."""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from smart_transfer.cli.main import build_parser
from smart_transfer.config import Declared
from tests.conftest import CLI, ROOT, ServerProcess, make_files, run_cli, start_server, summary

EXAMPLES = int(os.environ.get("SMART_TRANSFER_CLI_FUZZ_EXAMPLES", "6"))
#: The larger profile `make test-faults` runs (examples per command).
FAULTS_EXAMPLES = int(os.environ.get("SMART_TRANSFER_CLI_FUZZ_FAULTS_EXAMPLES", "40"))
#: Seconds a run may take (a hang is a failure), and how long a server command is left running.
RUN_TIMEOUT = 90.0
SERVER_RUN_SECONDS = 3.0
#: Seconds a server may take to stop after SIGINT (its own exit deadline is shorter).
STOP_TIMEOUT = 30.0
LONG_RUNNING = {("serve",), ("peer", "serve")}
#: Options not fuzzed: binding a server beyond loopback would break the workplace's network rule.
NOT_FUZZED = {"--host", "--help", "-h", "--verbose", "--follow"}
#: Directories of a workspace or store whose contents a failed command may leave for a re-run to resume
#: (staging, the index's own log files), which are not the visible state.
INTERNAL = ("index", ".store")
RUNS: Counter[str] = Counter()


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for sub in subs:
        for name, child in sub.choices.items():
            yield from _commands(child, (*path, name))


COMMANDS = dict(_commands(build_parser()))


@dataclass
class Sandbox:
    root: Path
    workspace: Path
    places: Path
    cwd: Path
    home: Path
    server: ServerProcess

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(self.home),
            "SMART_TRANSFER_WORKSPACE": str(self.workspace),
            "SMART_TRANSFER_TOKEN": "",
            # S3 commands reach nothing but loopback: no endpoint given means this unreachable one
            "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
            "AWS_ACCESS_KEY_ID": "fuzz",
            "AWS_SECRET_ACCESS_KEY": "fuzz",
        }


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    root = tmp_path_factory.mktemp("fuzz")
    places, cwd, home = root / "places", root / "cwd", root / "home"
    for directory in (places, cwd, home, places / "dir"):
        directory.mkdir()
    os.mknod(places / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    os.mknod(places / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
    os.mkfifo(places / "fifo")
    (places / "orders.csv").write_text('id,name\n1,"a, ""quoted"" name"\n2,ünïcödé\n', encoding="utf-8")
    (places / "empty.csv").write_text("")
    (places / "link").symlink_to(places / "orders.csv")
    (places / "dangling").symlink_to(places / "missing.csv")
    server = start_server(root / "server")
    workspace = root / "ws"
    run_cli("add", "sales", *map(str, make_files(root / "in", 2, 100)), workspace=workspace)
    summary(run_cli("push", "sales", f"{server.url}/sales", "--json", workspace=workspace))
    try:
        yield Sandbox(root, workspace, places, cwd, home, server)
    finally:
        server.stop()


def _state(directory: Path) -> dict[str, str]:
    """What a directory visibly holds: each entry's kind, and each small regular file's content hash."""
    found = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if any(part.startswith(INTERNAL) for part in relative.parts):
            continue
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            size = path.stat().st_size
            found[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest() if size < 1 << 20 else str(size)
        else:
            found[str(relative)] = stat.filemode(mode)
    return found


def _snapshot(box: Sandbox) -> dict[str, dict[str, str]]:
    return {
        "workspace": _state(box.workspace),
        "server": _state(box.server.root),
        "places": _state(box.places),
        "cwd": _state(box.cwd),
        "home": _state(box.home),
    }


def _shown(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


#: Text every integer, version and range argument is also given: numbers longer than Python converts,
#: unicode digits, signs, decimals, NUL's escape, paths.
HOSTILE_NUMBERS = ["9" * 4301, "9" * 5000, "\u0663", "\uff11\uff12", "+5", "-0", "1.5", "1e3", "%00", "../", "1_000"]


def _numbers(declared: Declared) -> st.SearchStrategy[str]:
    edges = ["0", "-1", "1", str(2**63), "1" + "0" * 400]
    for bound in (declared.minimum, declared.maximum):
        if bound is not None:
            edges += [_shown(v) for v in (bound, bound - 1, bound + 1, bound / 2, bound * 2)]
    return st.sampled_from([*edges, "nan", "inf", "-inf", "1e400", "abc", "", " 5", "5M", "0x10", *HOSTILE_NUMBERS])


def _versions() -> st.SearchStrategy[str]:
    """A version (a block's sequence number or hash) or a range of them, valid or hostile."""
    valid = ["0", "1", "2", "0-1", "1-", "-1", "2-1", "1-9", f"f1220{'0' * 64}", "99"]
    hostile = [*HOSTILE_NUMBERS, "-" + "9" * 5000, "9" * 5000 + "-", "../../etc/passwd", "garbage", ""]
    return st.sampled_from(valid + hostile)


def _values(box: Sandbox) -> dict[str, st.SearchStrategy[str]]:
    url = box.server.url
    text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\0"), max_size=12)
    names = st.sampled_from(["sales", "other", "a.b-c_d", "", " ", "..", "a/b", "ünï", "x" * 101, "-x", "sales\n"])
    urls = st.sampled_from(
        [
            f"{url}/sales",
            f"{url}/nope",
            url,
            f"{url}/",
            "http://127.0.0.1:1/x",
            "https://127.0.0.1:1/x",
            "http://localhost:1/x",
            "http://[::1]:1/x",
            "ftp://127.0.0.1/x",
            "htp:/nowhere",
            "http://",
            "http:///x",
            "http://u:p@127.0.0.1:1/x",
            "http://127.0.0.1:99999/x",
            "http://127.0.0.1:1/a/../b",
            "http://127.0.0.1:1/x?y#z",
            "http://bad host/x",
            "://x",
            "",
        ]
    )
    paths = st.sampled_from(
        [str(box.places / n) for n in ("null", "full", "fifo", "dir", "orders.csv", "empty.csv", "link", "dangling")]
        + [str(box.places / "missing" / "x.csv"), "-", "", "out.csv", "out.parquet", "/proc/x.csv", "/sys/x"]
    )
    times = st.sampled_from(
        [
            *("30d", "2030-01-31T12:00:00Z", "2030-01-31", "9999-12-31T23:59:59-18:00", "1969-12-31T23:59:59.9999995Z"),
            *("-1d", "1e400d", "2030-02-30", *HOSTILE_NUMBERS),
        ]
    )
    return {
        "name": names | text,
        "url": urls | names,
        "path": paths,
        "text": text | names,
        "version": _versions(),
        "time": times,
    }


def _kind(action: argparse.Action) -> str:
    dest = action.dest
    if dest in ("url", "s3_endpoint", "s3_public_endpoint", "public_url", "announce"):
        return "url"
    if dest in ("dataset", "subject", "as_name", "read", "write", "s3_bucket"):
        return "name"
    if dest in ("files", "input", "output", "out", "tokens", "tokens_file", "root", "workspace", "schema"):
        return "path"
    if dest in ("base", "target", "blocks", "offsets"):
        return "version"
    if dest == "expires":
        return "time"
    return "text"


def _value(box: Sandbox, action: argparse.Action) -> st.SearchStrategy[str]:
    declared = getattr(action.type, "declared", None)
    if isinstance(declared, Declared) and (declared.minimum is not None or declared.maximum is not None):
        return _numbers(declared)
    if action.choices:
        return st.sampled_from([*map(str, action.choices), "", "nonsense"])
    return _values(box)[_kind(action)]


@st.composite
def _invocation(draw: st.DrawFn, box: Sandbox, path: tuple[str, ...]) -> list[str]:
    parser = COMMANDS[path]
    argv = list(path)
    for action in parser._actions:
        if action.option_strings:
            continue
        count = {None: 1, "?": draw(st.integers(0, 1)), "+": draw(st.integers(1, 3)), "*": draw(st.integers(0, 2))}
        for _ in range(count.get(action.nargs, 1)):  # type: ignore[call-overload]
            argv.append(draw(_value(box, action)))
    options = [a for a in parser._actions if a.option_strings and not set(a.option_strings) & NOT_FUZZED]
    for action in draw(st.lists(st.sampled_from(options), max_size=3, unique_by=id)) if options else []:
        argv.append(action.option_strings[-1])
        if action.nargs != 0:
            argv.append(draw(_value(box, action)))
    if path in LONG_RUNNING:
        argv += ["--host", "127.0.0.1"]
    return argv


def _run(box: Sandbox, argv: list[str]) -> tuple[int | None, str]:
    # PYTHONFAULTHANDLER: a server that does not stop is sent SIGABRT, and its threads' stacks say why
    env = {**box.env(), "PYTHONFAULTHANDLER": "1"}
    process = subprocess.Popen(
        [*CLI, *argv], cwd=box.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    long_running = tuple(argv[:2]) in LONG_RUNNING or tuple(argv[:1]) in LONG_RUNNING
    try:
        _, err = process.communicate(timeout=SERVER_RUN_SECONDS if long_running else RUN_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGINT if long_running else signal.SIGKILL)
        try:
            _, err = process.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            _, err = process.communicate(timeout=STOP_TIMEOUT)
            pytest.fail(f"{argv} did not stop within {STOP_TIMEOUT} s of SIGINT; its stacks:\n{err[-6000:]}")
        if not long_running:
            pytest.fail(f"{argv} did not end within {RUN_TIMEOUT} s")
        return None, err
    return process.returncode, err


def _check(box: Sandbox, argv: list[str]) -> None:
    before = _snapshot(box)
    code, err = _run(box, argv)
    RUNS[" ".join(argv[:2] if tuple(argv[:2]) in COMMANDS else argv[:1])] += 1
    assert "Traceback" not in err, (argv, err)
    assert "error: unexpected" not in err, (argv, err)  # the catch-all for bugs fired
    if code is None:  # a server that started, stopped by Ctrl-C
        return
    assert code in (0, 1, 2, 3), (argv, code, err)
    if code != 0:
        lines = err.splitlines()
        assert len(lines) == 1, (argv, code, err)
        assert _snapshot(box) == before, (argv, code, err)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode) and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def _fuzz(box: Sandbox, path: tuple[str, ...], examples: int) -> None:
    examples = max(1, examples // 3) if path == ("ingest",) else examples  # each ingest starts a JVM

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=_invocation(box, path))
    def run(argv: list[str]) -> None:
        _check(box, argv)

    run()
    assert RUNS[" ".join(path)] >= 1


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_survives_generated_arguments(sandbox: Sandbox, path: tuple[str, ...]) -> None:
    _fuzz(sandbox, path, EXAMPLES)


@pytest.mark.faults
@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_survives_many_generated_arguments(sandbox: Sandbox, path: tuple[str, ...]) -> None:
    _fuzz(sandbox, path, FAULTS_EXAMPLES)


def test_every_number_version_and_time_argument_gets_hostile_numbers() -> None:
    """Each argument read as a number (a declared bound), a version or range, or a time is fuzzed as one."""
    numeric = []
    for path, parser in COMMANDS.items():
        for action in parser._actions:
            declared = getattr(action.type, "declared", None)
            bounded = isinstance(declared, Declared) and declared.parse in (int, float)
            if bounded or _kind(action) in ("version", "time"):
                numeric.append((path, action.dest))
    dests = {dest for _, dest in numeric}
    assert {"base", "target", "blocks", "offsets", "expires", "records"} <= dests, sorted(dests)
    assert len(numeric) >= 20, numeric


def test_the_fuzzer_reaches_every_command() -> None:
    assert len(COMMANDS) >= 20, sorted(COMMANDS)
    assert sys.executable  # runs under the same interpreter as the CLI it drives
