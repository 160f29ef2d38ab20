"""``token list`` and ``token revoke``, and a running server that follows its tokens file: added
tokens work and revoked ones are refused from the next request, without a restart."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import orjson

from tests.conftest import CLI, make_files, run_cli, summary
from tests.integration.test_read import one_line_error
from tests.integration.test_security import token


def token_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "token", *args], capture_output=True, text=True, check=False)


def test_token_list_shows_subjects_and_grants_never_secrets(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    secrets = [token(tokens, "alice", "--read", "*"), token(tokens, "bob", "--write", "sales-*", "--read", "x")]
    secrets.append(token(tokens, "bob", "--read", "y"))
    listed = token_cli("list", "--tokens", str(tokens), "--json")
    assert orjson.loads(listed.stdout) == [
        {"subject": "alice", "read": ["*"], "write": []},
        {"subject": "bob", "read": ["x"], "write": ["sales-*"]},
        {"subject": "bob", "read": ["y"], "write": []},
    ]
    text = token_cli("list", "--tokens", str(tokens)).stdout
    assert text.splitlines()[0] == "alice  read=*  write=-"
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
    one_line_error(run_cli("pull", url, "--token", alice, workspace=b), 3, "unknown token")
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
