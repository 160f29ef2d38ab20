"""A token that cannot be a bearer token (control characters, spaces, non-ASCII) is refused before any
request carries it: by the SDK's Client, and by every command with one line and exit 2 (the CLI fuzzer
found ``ls --token $'\\x1f'`` ending in an unexpected ValueError from the HTTP library)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from smart_transfer.client import Client
from smart_transfer.protocol import InvalidToken, authorization, check_token
from smart_transfer.server.auth import new_token
from tests.conftest import CLI

MALFORMED = ["\x1f", "a b", "tok\r\nX-Injected: 1", "é", "\x7f", "=abc", "abc=def"]
#: Nothing listens here: a command that got past the token check would fail to connect instead.
NOWHERE = "http://127.0.0.1:9/ds"


@pytest.mark.parametrize("token", ["st_abc", "a-b.c_d~e+f/g==", "issued"])
def test_a_well_formed_token_is_sent(token: str) -> None:
    if token == "issued":  # drawn here, not at collection: every pytest-xdist worker must collect the same ids
        token = new_token()
    check_token(token)
    assert authorization(token) == {"Authorization": f"Bearer {token}"}


def test_an_empty_token_is_no_token() -> None:
    """``SMART_TRANSFER_TOKEN=`` (a CI job whose secret is unset) sends requests without one."""
    check_token("")
    assert authorization("") == {} and authorization(None) == {}
    assert Client(None, token="").token == ""


@pytest.mark.parametrize("token", MALFORMED)
def test_a_malformed_token_is_never_sent(token: str) -> None:
    with pytest.raises(InvalidToken):
        authorization(token)
    with pytest.raises(InvalidToken):
        Client(None, token=token)


@pytest.mark.parametrize(
    ("argv", "via_env"),
    [
        (["pull", NOWHERE], False),
        (["push", "ds", NOWHERE], False),
        (["ls", "http://127.0.0.1:9/"], False),
        (["status", "ds", NOWHERE], True),
        (["verify", "ds", NOWHERE], True),
    ],
)
def test_every_command_refuses_a_malformed_token_with_one_line(argv: list[str], via_env: bool, tmp_path: Path) -> None:
    env = {**os.environ, "SMART_TRANSFER_WORKSPACE": str(tmp_path / "ws")}
    if via_env:
        env["SMART_TRANSFER_TOKEN"] = "tok\x1fen"
    else:
        argv = [*argv, "--token", "tok\x1fen"]
    done = subprocess.run([*CLI, *argv], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "invalid token" in lines[0], done.stderr
    assert ("SMART_TRANSFER_TOKEN" if via_env else "--token") in lines[0]
