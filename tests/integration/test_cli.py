"""The CLI as a user runs it: a real process, one clear line on bad input, the right exit codes."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import orjson
import pytest

from tests.conftest import CLI, ServerProcess, free_port


def run(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args, "--workspace", str(workspace)], capture_output=True, text=True, check=False)


def test_add_log_list(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(f"file {i}".encode())
    result = run(ws, "add", "sales", str(tmp_path / "f0"), str(tmp_path / "f1"), "--records", "10")
    assert result.returncode == 0, result.stderr
    assert "added 2 block(s)" in result.stdout
    assert run(ws, "add", "sales", str(tmp_path / "f2")).returncode == 0
    log = run(ws, "log", "sales", "--json")
    records = [orjson.loads(line) for line in log.stdout.splitlines()]
    assert [r["sequence_number"] for r in records] == [3, 2, 1, 0]
    assert [r["type"] for r in records] == ["AddData", "AddData", "AddData", "Seed"]
    assert records[0]["new_data"]["offset_interval"] == {"start": 20, "end": 20}
    listing = orjson.loads(run(ws, "list", "--json").stdout)
    assert listing == [{"name": "sales", "head": records[0]["hash"], "blocks": 4, "records": 21}]
    text_log = run(ws, "log", "sales", "--limit", "1")
    assert text_log.stdout.count("\n") == 1 and "AddData" in text_log.stdout


@pytest.mark.parametrize(
    ("args", "fragment", "code"),
    [
        (("add", "../escape", "FILE"), "invalid dataset name", 2),
        (("add", "a/b", "FILE"), "invalid dataset name", 2),
        (("add", "ok", "/no/such/file"), "no such file", 1),
        (("log", "missing"), "dataset not found", 1),
        (("log", "%2e%2e"), "invalid dataset name", 2),
    ],
)
def test_bad_input_is_one_clear_line_and_changes_nothing(
    tmp_path: Path, args: tuple[str, ...], fragment: str, code: int
) -> None:
    ws = tmp_path / "ws"
    real = tmp_path / "real"
    real.write_bytes(b"x")
    (ws / "index").mkdir(parents=True)  # an (empty) workspace exists: read-only commands read it
    result = run(ws, *(str(real) if a == "FILE" else a for a in args))
    assert result.returncode == code
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and fragment in result.stderr
    assert orjson.loads(run(ws, "list", "--json").stdout) == []


@pytest.mark.parametrize(
    "command",
    [
        ("log", "x"),
        ("list",),
        ("verify", "x"),
        ("tail", "x"),
        ("export", "x", "x.csv"),
        ("status", "x"),
        ("remote", "list"),
    ],
)
def test_read_only_commands_on_a_missing_workspace_say_so_and_create_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    ws = tmp_path / "nowhere"
    result = run(ws, *command)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no workspace at" in result.stderr
    assert not ws.exists()


@pytest.mark.parametrize("given", [[], ["--format", "json"], ["--format", "csv"]])
def test_an_ingest_of_a_missing_input_creates_no_workspace(tmp_path: Path, given: list[str]) -> None:
    # found by the CLI fuzzer: with --format the input was looked for only after the workspace existed
    ws = tmp_path / "out.parquet"
    result = run(ws, "ingest", "https", *given, "--input", str(tmp_path / "ünï"))
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "no such input" in result.stderr
    assert not ws.exists()


@pytest.mark.parametrize(
    "command",
    ["serve", "pull", "push", "gc", "ingest", "verify", "log", "tail", "export", "status", "ls", "remote list"],
)
def test_help_shows_each_default_once(command: str) -> None:
    result = subprocess.run([*CLI, *command.split(), "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    flat = " ".join(result.stdout.split())
    assert "(default: None)" not in flat
    assert re.search(r"\(default: [^)]*\) \(default:", flat) is None  # never two defaults for one option


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    result = run(tmp_path, "add")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["serve", "add", "log", "list"])
def test_every_command_explains_itself(command: str) -> None:
    result = subprocess.run([*CLI, command, "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0
    assert "usage: smart-transfer" in result.stdout
    assert "--workspace" in result.stdout or command == "serve"


def test_diff_compares_two_versions_in_text_and_json(tmp_path: Path) -> None:
    from smart_transfer.model import DataField, SetDataSchema
    from smart_transfer.repo import Workspace

    ws = tmp_path / "ws"
    for i in range(2):
        (tmp_path / f"f{i}").write_bytes(f"file {i}".encode())
    assert run(ws, "add", "sales", str(tmp_path / "f0"), "--records", "5").returncode == 0
    with Workspace(ws) as opened:
        opened.dataset("sales").append([SetDataSchema((DataField("offset", "BIGINT", False), DataField("a", "INT")))])
    assert run(ws, "add", "sales", str(tmp_path / "f1"), "--records", "3").returncode == 0
    with Workspace(ws) as opened:
        opened.dataset("sales").append(
            [SetDataSchema((DataField("offset", "BIGINT", False), DataField("a", "BIGINT")))]
        )
    log = [orjson.loads(line) for line in run(ws, "log", "sales", "--json").stdout.splitlines()]
    hashes = {r["sequence_number"]: r["hash"] for r in log}

    result = run(ws, "diff", "sales", hashes[1], "--json")  # FROM by hash, TO the head
    assert result.returncode == 0, result.stderr
    diff = orjson.loads(result.stdout)
    assert (diff["from"]["hash"], diff["to"]["hash"]) == (hashes[1], hashes[4])
    assert (diff["blocks"], diff["records"], diff["events"]) == (3, 3, {"AddData": 1, "SetDataSchema": 2})
    assert [s["physical_hash"] for s in diff["slices"]] == [log[1]["new_data"]["physical_hash"]]
    assert diff["data_bytes"] == len(b"file 1")
    assert [(c["name"], c["change"]) for c in diff["schema_changes"]] == [("offset", "added"), ("a", "added")]
    changed = orjson.loads(run(ws, "diff", "sales", "2", "4", "--json").stdout)["schema_changes"]
    assert changed == [{"name": "a", "change": "changed", "before": log[2]["fields"][1], "after": log[0]["fields"][1]}]

    text = run(ws, "diff", "sales")  # block 0 to the head
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("sales: block 0 -> block 4\n") and hashes[4] in text.stdout
    assert "records      +8 (0 -> 8)" in text.stdout and log[1]["new_data"]["physical_hash"] in text.stdout


def test_diff_reads_slice_footers_where_the_chain_records_no_schema(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from smart_transfer.model import DataField, SetDataSchema
    from smart_transfer.repo import Workspace
    from smart_transfer.repo.compare import compare_versions

    ws = tmp_path / "ws"
    tables = [pa.table({"offset": pa.array([0], pa.int64())}), pa.table({"offset": [1], "score": [1.5]})]
    for number, table in enumerate(tables):
        pq.write_table(table, tmp_path / f"{number}.parquet")
        assert run(ws, "add", "plain", str(tmp_path / f"{number}.parquet"), "--records", "1").returncode == 0
    recorded = (DataField("offset", "BIGINT", False),)
    with Workspace(ws) as opened:
        opened.dataset("plain").append([SetDataSchema(recorded)])  # block 3
    diff = orjson.loads(run(ws, "diff", "plain", "1", "2", "--json").stdout)
    assert [(c["change"], c["name"], c["after"]) for c in diff["schema_changes"]] == [
        ("added", "score", {"name": "score", "type": "DOUBLE", "nullable": True})
    ]
    assert (diff["schema_source_before"], diff["schema_source_after"]) == ("footer", "footer")
    assert "schema       slice footer -> slice footer\n" in run(ws, "diff", "plain", "1", "2").stdout
    with Workspace(ws) as opened:
        dataset = opened.dataset("plain")
        seed_to_first = compare_versions(dataset, dataset.require_tip(), "0", "1")  # block 0 holds no slice
        to_recorded = compare_versions(dataset, dataset.require_tip(), "2", "3")
    assert seed_to_first.schema_sources == ("", "footer") and seed_to_first.schema_after == (
        DataField("offset", "BIGINT"),
    )
    assert to_recorded.schema_sources == ("footer", "recorded")
    assert [(c.change, c.name) for c in to_recorded.schema_changes] == [("changed", "offset"), ("removed", "score")]


def test_diff_of_a_version_not_on_the_chain_is_one_clear_line(tmp_path: Path) -> None:
    """Exit codes as export's: a version that is no version, or a backwards pair, is a usage error (2);
    a well-formed version the chain does not have is "not in the data" (1)."""
    ws = tmp_path / "ws"
    (tmp_path / "f").write_bytes(b"x")
    assert run(ws, "add", "sales", str(tmp_path / "f")).returncode == 0
    cases = {
        ("9",): (1, "sales has no block 9: its blocks are 0 to 1"),
        (f"f1220{'0' * 64}",): (1, "has no block f1220"),
        ("1", "0"): (2, "from (block 1) is after to (block 0)"),
        ("head~1",): (2, "not a block: 'head~1'"),
        ("garbage",): (2, "not a block: 'garbage'"),
        ("-1",): (2, "not a block: '-1'"),
        ("1.5",): (2, "not a block: '1.5'"),
        ("../../etc/passwd",): (2, "not a block: '../../etc/passwd'"),
        ("\u0663",): (2, "not a block"),  # an Arabic-Indic three: no ASCII digit
        ("9" * 5000,): (2, "(5,000 characters)"),  # more digits than Python converts: read by length first
        ("0", "9" * 4300): (2, "not a block"),
    }
    for versions, (code, fragment) in cases.items():
        result = run(ws, "diff", "sales", *versions)
        assert result.returncode == code and result.stdout == "", (versions, result.stderr)
        assert result.stderr.count("\n") == 1 and fragment in result.stderr, (versions, result.stderr)
        assert "Traceback" not in result.stderr and "unexpected" not in result.stderr
    export = run(ws, "export", "sales", str(tmp_path / "out.csv"), "--blocks", "2-1")
    assert export.returncode == 2 and "ends before it starts" in export.stderr  # the rule diff follows
    huge = run(ws, "export", "sales", str(tmp_path / "out.csv"), "--blocks", "9" * 5000)
    assert huge.returncode == 2 and huge.stderr.count("\n") == 1 and "out of range" in huge.stderr


def test_clients_connect_directly_whatever_proxy_the_environment_names(
    local_server: ServerProcess, tmp_path: Path
) -> None:
    """The session, like the object transfers, ignores proxy variables: with every one naming a port
    nothing listens on, a push and a pull still go straight to the server and its store."""
    dead = f"http://127.0.0.1:{free_port()}"
    proxies = {name: dead for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy")}
    env = {**os.environ, **proxies, "NO_PROXY": "", "no_proxy": ""}
    (tmp_path / "f").write_bytes("proxied? ünïcode".encode())
    name, url = "proxyless", f"{local_server.url}/proxyless-{tmp_path.name[-8:]}"
    steps = [("add", name, str(tmp_path / "f")), ("push", name, url, "--json"), ("pull", url, "--as", "back", "--json")]
    for step, workspace in zip(steps, ("a", "a", "b"), strict=True):
        done = subprocess.run(
            [*CLI, *step, "--workspace", str(tmp_path / workspace)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["objects_transferred"] == 1


def test_a_first_pull_that_cannot_reach_its_server_leaves_nothing_behind(tmp_path: Path) -> None:
    """The workspace a first pull creates is taken back when the pull fails before anything arrived: in
    an existing directory (only what the pull made goes), at a path none of whose directories exist, and
    never in a workspace that was there before."""
    empty, other = tmp_path / "empty", tmp_path / "empty" / "notes.txt"
    empty.mkdir()
    other.write_text("not the workspace's")
    existing = tmp_path / "existing"
    (tmp_path / "f").write_bytes(b"x")
    assert run(existing, "add", "kept", str(tmp_path / "f")).returncode == 0
    before = sorted(p.relative_to(existing) for p in (existing / "store").rglob("*"))
    dead = f"http://127.0.0.1:{free_port()}/x"
    for workspace in (empty, tmp_path / "missing" / "deep" / "ws", existing):
        result = run(workspace, "pull", dead)
        assert result.returncode == 1 and "Unreachable" in result.stderr, result.stderr
    assert sorted(p.name for p in empty.iterdir()) == ["notes.txt"] and other.read_text() == "not the workspace's"
    assert not (tmp_path / "missing").exists()
    assert sorted(p.relative_to(existing) for p in (existing / "store").rglob("*")) == before
    assert [d["name"] for d in orjson.loads(run(existing, "list", "--json").stdout)] == ["kept"]
