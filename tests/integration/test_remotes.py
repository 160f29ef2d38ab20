"""Everyday commands against a server on either store: a dataset remembers its remote (``pull DATASET``,
``push DATASET``, ``remote list|set|remove``), ``status`` compares with it in one request, and ``ls``
lists what a token may read."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, ServerProcess, make_files, run_cli, summary
from tests.integration.test_read import one_line_error
from tests.integration.test_security import token


def status(workspace: Path, name: str, *url: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("status", name, *url, "--json", workspace=workspace)
    assert "Traceback" not in result.stderr and result.returncode in (0, 3), result.stderr
    return result.returncode, orjson.loads(result.stdout)


def remotes(workspace: Path) -> list[dict[str, Any]]:
    result = run_cli("remote", "list", "--json", workspace=workspace)
    assert result.returncode == 0, result.stderr
    value: list[dict[str, Any]] = orjson.loads(result.stdout)
    return value


def test_a_dataset_remembers_its_remote_and_pull_and_push_use_it(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{smart_server.url}/{dataset_name}"
    files = make_files(tmp_path / "in", 4, 100)
    run_cli("add", dataset_name, str(files[0]), workspace=a)
    one_line_error(run_cli("push", dataset_name, workspace=a), 2, f"{dataset_name} has no remote")
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    assert [(r["dataset"], r["remote"]) for r in remotes(a)] == [(dataset_name, url)]
    run_cli("add", dataset_name, str(files[1]), workspace=a)
    pushed = summary(run_cli("push", dataset_name, "--json", workspace=a))  # no URL: its remote
    assert (pushed["remote"], pushed["blocks"]) == (url, 1)

    pulled = summary(run_cli("pull", url, "--as", "copy", "--json", workspace=b))
    assert remotes(b)[0] | {"last_seen_head": None} == {"dataset": "copy", "remote": url, "last_seen_head": None}
    assert remotes(b)[0]["last_seen_head"] == pulled["new_head"]
    run_cli("add", dataset_name, str(files[2]), workspace=a)
    summary(run_cli("push", dataset_name, "--json", workspace=a))
    again = summary(run_cli("pull", "copy", "--json", workspace=b))  # by name
    assert (again["remote"], again["blocks"]) == (url, 1)

    # a later explicit URL does not replace the remembered one; `remote set` does
    other = f"{smart_server.url}/{dataset_name}-mirror"
    summary(run_cli("push", "copy", other, "--json", workspace=b))
    assert remotes(b)[0]["remote"] == url
    assert run_cli("remote", "set", "copy", other, workspace=b).returncode == 0
    assert summary(run_cli("pull", "copy", "--json", workspace=b))["remote"] == other
    assert run_cli("remote", "list", "copy", workspace=b).stdout.startswith(f"copy  {other}")
    assert run_cli("remote", "remove", "copy", workspace=b).returncode == 0
    assert remotes(b) == []
    one_line_error(run_cli("remote", "remove", "copy", workspace=b), 1, "copy has no remote")
    one_line_error(run_cli("pull", "copy", workspace=b), 2, "copy has no remote")


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [
        (("pull", "not a name!"), 2, "neither a dataset URL"),
        (("pull", "sales", "--as", "other"), 2, "is not a URL"),
        (("remote", "set", "sales", "ftp://host/sales"), 2, "not a dataset URL"),
        (("remote", "set", "sales", "http://alice:s3cret@host/sales"), 2, "credentials do not belong in the URL"),
        (("remote", "set", "../x", "http://host/x"), 2, "invalid dataset name"),
        (("status", "sales"), 2, "sales has no remote"),
        (("ls", "http://127.0.0.1:1"), 1, "cannot reach"),
        (("ls", "http:///nohost"), 2, "not a server URL"),
        (("ls", "htp:/nowhere"), 2, "not a server URL (http(s)://HOST[:PORT][/PREFIX])"),
    ],
)
def test_bad_remote_input_is_one_clear_line(tmp_path: Path, args: tuple[str, ...], code: int, fragment: str) -> None:
    ws = tmp_path / "ws"
    run_cli("add", "sales", str(make_files(tmp_path / "in", 1, 10)[0]), workspace=ws)
    result = (
        run_cli(*args, workspace=ws)
        if args[0] != "ls"
        else subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)
    )
    one_line_error(result, code, fragment)
    assert "s3cret" not in result.stderr


def test_status_says_same_ahead_behind_diverged_or_missing(
    smart_server: ServerProcess, dataset_name: str, tmp_path: Path
) -> None:
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    url = f"{smart_server.url}/{dataset_name}"
    files = make_files(tmp_path / "in", 6, 100)
    run_cli("add", dataset_name, str(files[0]), "--records", "10", workspace=a)
    code, report = status(a, dataset_name, url)
    assert (code, report["relation"], report["remote_head"]) == (0, "remote-missing", None)
    summary(run_cli("push", dataset_name, url, "--json", workspace=a))
    summary(run_cli("pull", url, "--json", workspace=b))
    code, report = status(a, dataset_name)
    assert (code, report["relation"], report["head"], report["remote_head"]) == (0, "same", *[report["head"]] * 2)
    assert (report["blocks"], report["records"], report["remote_blocks"], report["remote_records"]) == (2, 10, 2, 10)

    run_cli("add", dataset_name, str(files[1]), str(files[2]), "--records", "5", workspace=a)
    code, report = status(a, dataset_name)
    assert (code, report["relation"], report["local_only_blocks"], report["remote_only_blocks"]) == (
        0,
        "local-ahead",
        2,
        0,
    )
    summary(run_cli("push", dataset_name, "--json", workspace=a))
    head_before = run_cli("log", dataset_name, "--json", workspace=b).stdout
    code, report = status(b, dataset_name)
    assert (code, report["relation"], report["remote_only_blocks"], report["remote_records"]) == (
        0,
        "remote-ahead",
        2,
        20,
    )
    assert run_cli("log", dataset_name, "--json", workspace=b).stdout == head_before  # nothing moved
    text = run_cli("status", dataset_name, workspace=b).stdout
    assert "behind the remote by 2 block(s); pull fetches them" in text and url in text

    run_cli("add", dataset_name, str(files[3]), workspace=b)
    code, report = status(b, dataset_name)
    assert (code, report["relation"]) == (3, "diverged")
    assert "diverged from the remote" in run_cli("status", dataset_name, workspace=b).stdout

    # a dataset not pulled yet: all of the remote is ahead
    assert run_cli("remote", "set", "fresh", url, workspace=c).returncode == 0
    code, report = status(c, "fresh")
    assert (code, report["relation"], report["head"], report["remote_only_blocks"]) == (0, "remote-ahead", None, 4)


def test_ls_lists_each_dataset_with_its_size(smart_server: ServerProcess, dataset_name: str, tmp_path: Path) -> None:
    a = tmp_path / "a"
    names = [f"{dataset_name}-one", f"{dataset_name}-two"]
    for i, name in enumerate(names):
        run_cli(
            "add", name, *map(str, make_files(tmp_path / f"in{i}", i + 1, 1000, name)), "--records", "7", workspace=a
        )
        summary(run_cli("push", name, f"{smart_server.url}/{name}", "--json", workspace=a))
    result = subprocess.run([*CLI, "ls", smart_server.url, "--json"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    listed = {d["name"]: d for d in orjson.loads(result.stdout) if d["name"] in names}
    assert [(d["blocks"], d["records"], d["data"]) for d in listed.values()] == [
        (2, 7, {"count": 1, "bytes": 1000}),
        (3, 14, {"count": 2, "bytes": 2000}),
    ]
    text = subprocess.run([*CLI, "ls", smart_server.url], capture_output=True, text=True, check=False).stdout
    assert text.splitlines()[0].split() == ["name", "head", "blocks", "records", "bytes"]
    assert any(line.split()[0] == names[1] and line.split()[2:] == ["3", "14", "2000"] for line in text.splitlines())
    heads = {line.split()[0]: line.split()[1] for line in text.splitlines()[1:]}
    assert heads[names[0]] == listed[names[0]]["head"]  # whole, so it can be copied


def test_ls_shows_only_what_the_token_may_read(server_factory: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    writer, reader = token(tokens, "writer", "--write", "*"), token(tokens, "reader", "--read", "team-*")
    server = server_factory("--tokens", str(tokens))
    a = tmp_path / "a"
    for name in ("team-a", "private"):
        run_cli("add", name, str(make_files(tmp_path / name, 1, 10)[0]), workspace=a)
        summary(run_cli("push", name, f"{server.url}/{name}", "--token", writer, "--json", workspace=a))

    def ls(secret: str | None) -> subprocess.CompletedProcess[str]:
        extra = ["--token", secret] if secret else []
        return subprocess.run([*CLI, "ls", server.url, "--json", *extra], capture_output=True, text=True, check=False)

    assert [d["name"] for d in orjson.loads(ls(writer).stdout)] == ["private", "team-a"]
    assert [d["name"] for d in orjson.loads(ls(reader).stdout)] == ["team-a"]
    one_line_error(ls(None), 3, "a bearer token is required")
