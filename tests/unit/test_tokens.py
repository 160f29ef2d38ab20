"""Generated tokens are usable as they are printed: `--token VALUE` must never read one as an option."""

from __future__ import annotations

from pathlib import Path

from smart_transfer.cli.main import build_parser
from smart_transfer.server.auth import TOKEN_PREFIX, add_token, load_grants


def test_generated_tokens_never_look_like_an_option(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    parser = build_parser()
    # about one token in 64 started with "-" before the prefix: 300 make a miss very unlikely
    for number in range(300):
        secret = add_token(tokens, f"user{number}", ["*"], [])
        assert secret.startswith(TOKEN_PREFIX)
        args = parser.parse_args(["pull", "http://127.0.0.1:1/x", "--token", secret])
        assert args.token == secret
    assert len(load_grants(tokens)) == 300
