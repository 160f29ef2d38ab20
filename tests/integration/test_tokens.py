"""``token list`` and ``token revoke``, and a running server that follows its tokens file: added
tokens work and revoked ones are refused from the next request, without a restart."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import CLI, ServerProcess, free_port, make_files, run_cli, summary
from tests.integration.test_read import one_line_error
from tests.integration.test_security import token


def token_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "token", *args], capture_output=True, text=True, check=False)


def test_token_list_shows_subjects_and_grants_never_secrets(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    secrets = [token(tokens, "alice", "--read", "*"), token(tokens, "bob", "--write", "sales-*", "--read", "x")]
    secrets.append(token(tokens, "bob", "--read", "y"))
    listed = token_cli("list", "--tokens", str(tokens), "--json")
    never = {"expires": None, "expired": False}
    assert orjson.loads(listed.stdout) == [
        {"subject": "alice", "read": ["*"], "write": [], **never},
        {"subject": "bob", "read": ["x"], "write": ["sales-*"], **never},
        {"subject": "bob", "read": ["y"], "write": [], **never},
    ]
    text = token_cli("list", "--tokens", str(tokens)).stdout
    assert text.splitlines()[0] == "alice  read=*  write=-  expires=never"
    stored = orjson.loads(tokens.read_bytes())["tokens"]
    for output in (listed.stdout, text):
        assert not any(s in output for s in secrets) and not any(e["sha256"] in output for e in stored)

    revoked = token_cli("revoke", "bob", "--tokens", str(tokens))
    assert revoked.returncode == 0 and "revoked 2 token(s) of bob" in revoked.stdout
    assert [e["subject"] for e in orjson.loads(token_cli("list", "--tokens", str(tokens), "--json").stdout)] == [
        "alice"
    ]
    assert oct(tokens.stat().st_mode & 0o777) == "0o600"
    one_line_error(token_cli("revoke", "bob", "--tokens", str(tokens)), 1, "no token of 'bob'")
    one_line_error(token_cli("list", "--tokens", str(tmp_path / "none.json")), 1, "no tokens file at")
    (tmp_path / "bad.json").write_text("{not json")
    one_line_error(token_cli("revoke", "x", "--tokens", str(tmp_path / "bad.json")), 1, "is malformed")


def test_token_expires_is_checked_stored_and_listed(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    add, profile = ["add", "--subject", "a", "--read", "*"], ["profile", "a", "--url", "http://h", "--read", "*"]
    for command, bad, says in (
        (add, "2020-01-01", "'2020-01-01' is not in the future (2020-01-01T00:00:00Z is not after now)"),
        (add, "0", "is not in the future"),
        (add, "soon", "not a duration or an ISO-8601 time: 'soon'"),
        (profile, "2030-02-30", "not a duration or an ISO-8601 time"),
    ):
        one_line_error(token_cli(*command, "--tokens", str(tokens), "--expires", bad), 2, says)
    assert not tokens.exists()
    token(tokens, "later", "--read", "*", "--expires", "2030-01-31T13:00:00+01:00")
    document = orjson.loads(tokens.read_bytes())
    document["tokens"].append({"subject": "gone", "sha256": "0" * 64, "expires": "2020-01-01T00:00:00Z"})
    tokens.write_bytes(orjson.dumps(document))
    assert token_cli("list", "--tokens", str(tokens)).stdout.splitlines() == [
        "later  read=*  write=-  expires=2030-01-31T12:00:00Z",
        "gone  read=-  write=-  expires=2020-01-01T00:00:00Z (expired)",
    ]
    listed = orjson.loads(token_cli("list", "--tokens", str(tokens), "--json").stdout)
    assert [(row["expires"], row["expired"]) for row in listed] == [
        ("2030-01-31T12:00:00Z", False),
        ("2020-01-01T00:00:00Z", True),
    ]


def test_a_running_server_follows_its_tokens_file(server_factory: Any, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    alice = token(tokens, "alice", "--write", "*")
    server = server_factory("--tokens", str(tokens))
    a, b = tmp_path / "a", tmp_path / "b"
    url = f"{server.url}/shared"
    run_cli("add", "shared", str(make_files(tmp_path / "in", 1, 100)[0]), workspace=a)
    summary(run_cli("push", "shared", url, "--token", alice, "--json", workspace=a))

    bob = token(tokens, "bob", "--read", "shared")  # added while it runs: works at once
    summary(run_cli("pull", url, "--token", bob, "--json", workspace=b))
    assert token_cli("revoke", "bob", "--tokens", str(tokens)).returncode == 0
    one_line_error(run_cli("pull", url, "--token", bob, workspace=b), 3, "unknown token")
    one_line_error(run_cli("status", "shared", "--token", bob, workspace=b), 3, "unknown token")
    assert run_cli("status", "shared", "--token", alice, workspace=b).returncode == 0

    # a tokens file broken by hand fails closed, and works again once fixed
    good = tokens.read_bytes()
    tokens.write_text('{"tokens": [')
    one_line_error(run_cli("pull", url, "--token", alice, workspace=b), 3, "tokens file is malformed")
    tokens.write_bytes(good)
    summary(run_cli("pull", url, "--token", alice, "--json", workspace=b))


def test_commands_changing_one_tokens_file_at_once_all_keep_their_change(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token(tokens, "keep", "--read", "*")
    adding = [
        subprocess.Popen(
            [*CLI, "token", "add", "--subject", f"user-{i}", "--tokens", str(tokens), "--read", "*"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(16)
    ]
    revoking = subprocess.Popen([*CLI, "token", "revoke", "keep", "--tokens", str(tokens)], stdout=subprocess.DEVNULL)
    assert [p.wait(120) for p in adding] == [0] * 16 and revoking.wait(120) == 0
    subjects = {e["subject"] for e in orjson.loads(tokens.read_bytes())["tokens"]}
    assert subjects == {f"user-{i}" for i in range(16)}  # every add kept, the revoke too


SHA = hashlib.sha256(b"st_not_a_real_token").hexdigest()
#: A tokens file of each malformed shape ``serve`` refuses, and what its one line says.
MALFORMED = {
    "string grant": ({"subject": "reader", "sha256": SHA, "read": "fp-*"}, "entry 0 (subject 'reader'): read:"),
    "number subject": ({"subject": 7, "sha256": SHA, "read": ["x"]}, "entry 0: subject: must be a string"),
    "short sha256": ({"subject": "reader", "sha256": SHA[:32], "read": ["x"]}, "entry 0 (subject 'reader'): sha256:"),
    "missing field": ({"subject": "reader", "read": ["x"]}, "entry 0 (subject 'reader'): sha256: missing"),
    "local expiry": (
        {"subject": "reader", "sha256": SHA, "expires": "2030-01-31 12:00"},
        "entry 0 (subject 'reader'): expires:",
    ),
}


@pytest.mark.parametrize("shape", sorted(MALFORMED))
def test_serve_refuses_a_malformed_tokens_file_with_one_line(shape: str, tmp_path: Path) -> None:
    entry, says = MALFORMED[shape]
    tokens = tmp_path / "tokens.json"
    tokens.write_bytes(orjson.dumps({"tokens": [entry]}))
    root = tmp_path / "root"
    port = str(free_port())
    result = run_cli(
        "serve", "--host", "127.0.0.1", "--port", port, "--root", str(root), "--tokens", str(tokens), timeout=60
    )
    one_line_error(result, 2, f"--tokens: tokens file {tokens} is malformed: {says}")
    assert not root.exists()


def _replace(path: Path, content: bytes) -> None:
    temp = path.with_name(path.name + ".new")
    temp.write_bytes(content)
    temp.replace(path)


def _lines_saying(server: ServerProcess, fragment: str, count: int) -> list[str]:
    """The server's output lines holding ``fragment``, once there are ``count`` of them (bounded wait:
    the thread reading its output may lag the answer the client already has)."""
    done = threading.Event()
    for _ in range(100):
        lines = [line for line in server.output if fragment in line]
        if len(lines) >= count:
            break
        done.wait(0.05)
    return lines


def test_a_running_server_refuses_every_token_while_its_tokens_file_is_malformed(
    server_factory: Any, tmp_path: Path
) -> None:
    tokens = tmp_path / "tokens.json"
    writer = token(tokens, "writer", "--write", "*")
    reader = token(tokens, "reader", "--read", "fp-*")
    server = server_factory("--tokens", str(tokens))
    work = tmp_path / "w"
    run_cli("add", "other", str(make_files(tmp_path / "in", 1, 100)[0]), workspace=work)
    summary(run_cli("push", "other", f"{server.url}/other", "--token", writer, "--json", workspace=work))
    one_line_error(run_cli("pull", f"{server.url}/other", "--token", reader, workspace=tmp_path / "r0"), 3, "may not")

    # the reader's grant turned into a string: read character by character it would hold "*"
    good = tokens.read_bytes()
    document = orjson.loads(good)
    document["tokens"][1]["read"] = "fp-*"
    _replace(tokens, orjson.dumps(document))
    for secret in (reader, writer, reader):
        result = run_cli("pull", f"{server.url}/other", "--token", secret, workspace=tmp_path / "r1")
        one_line_error(result, 3, "the server's tokens file is malformed")
    assert not (tmp_path / "r1" / "other").exists()
    logged = _lines_saying(server, "read: must be a list of patterns", 1)
    assert len(logged) == 1 and "entry 1 (subject 'reader')" in logged[0], logged
    assert len(_lines_saying(server, "read: must be a list of patterns", 2)) == 1  # not one per request

    _replace(tokens, good)
    summary(run_cli("pull", f"{server.url}/other", "--token", writer, "--json", workspace=tmp_path / "r2"))
    one_line_error(run_cli("pull", f"{server.url}/other", "--token", reader, workspace=tmp_path / "r3"), 3, "may not")


def test_token_commands_refuse_a_malformed_tokens_file_and_change_nothing(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    raw = orjson.dumps({"tokens": [MALFORMED["string grant"][0]]})
    tokens.write_bytes(raw)
    profile = tmp_path / "p.share"
    commands = (
        ["add", "--tokens", str(tokens), "--subject", "new", "--read", "*"],
        ["revoke", "reader", "--tokens", str(tokens)],
        ["list", "--tokens", str(tokens)],
        ["profile", "new", "--tokens", str(tokens), "--url", "https://h.example", "--read", "*", "-o", str(profile)],
    )
    for command in commands:
        one_line_error(token_cli(*command), 1, f"tokens file {tokens} is malformed: entry 0 (subject 'reader'): read")
        assert tokens.read_bytes() == raw
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.json"]


@pytest.mark.parametrize("device", ["/dev/full", "mknod"])
def test_token_profile_to_a_full_device_adds_no_token(device: str, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    token(tokens, "keep", "--read", "x")
    before = tokens.read_bytes()
    if device == "mknod":
        device = str(tmp_path / "full")
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 7))
    result = token_cli(
        "profile", "bob", "--tokens", str(tokens), "--url", "https://h.example", "--read", "*", "-o", device
    )
    one_line_error(result, 1, f"cannot write {device}: No space left on device")
    assert tokens.read_bytes() == before
    listed = orjson.loads(token_cli("list", "--tokens", str(tokens), "--json").stdout)
    assert listed == [{"subject": "keep", "read": ["x"], "write": [], "expires": None, "expired": False}]


def test_token_profile_takes_back_the_profile_it_wrote_when_the_token_cannot_be_added(tmp_path: Path) -> None:
    tokens = tmp_path / "missing-directory" / "tokens.json"  # checked fine (absent), then cannot be created
    profile = tmp_path / "p.share"
    result = token_cli(
        "profile", "bob", "--tokens", str(tokens), "--url", "https://h.example", "--read", "*", "-o", str(profile)
    )
    one_line_error(result, 1, "tokens file")
    assert not profile.exists() and not tokens.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
