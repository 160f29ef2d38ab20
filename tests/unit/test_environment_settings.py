"""Settings from the environment: a set variable gives the value (checked like the flag), an empty or
blank one counts as unset (the default holds), the command line wins over both."""

from __future__ import annotations

import argparse

import pytest

from smart_transfer.cli.declared import add_settings, settings_from
from smart_transfer.cli.exits import CliError
from smart_transfer.server.settings import ENV_PREFIX, ServerSettings


def _settings(argv: list[str], environ: dict[str, str]) -> ServerSettings:
    parser = argparse.ArgumentParser()
    add_settings(parser, ServerSettings, ENV_PREFIX)
    return settings_from(parser.parse_args(argv), ServerSettings, ENV_PREFIX, environ)


def test_an_empty_variable_is_unset_and_the_flag_wins() -> None:
    default = ServerSettings().max_sessions
    assert _settings([], {f"{ENV_PREFIX}MAX_SESSIONS": "7"}).max_sessions == 7
    assert _settings([], {f"{ENV_PREFIX}MAX_SESSIONS": ""}).max_sessions == default
    assert _settings([], {f"{ENV_PREFIX}MAX_SESSIONS": "  "}).max_sessions == default
    assert _settings(["--max-sessions", "9"], {f"{ENV_PREFIX}MAX_SESSIONS": "7"}).max_sessions == 9
    with pytest.raises(CliError, match="MAX_SESSIONS"):
        _settings([], {f"{ENV_PREFIX}MAX_SESSIONS": "-1"})


def test_sdk_options_of_the_wrong_type_are_refused() -> None:
    from smart_transfer.client import ClientOptions
    from smart_transfer.config import SettingError

    assert ClientOptions(parallel=8).parallel == 8
    for wrong in ("8", True, None.__class__):
        with pytest.raises(SettingError, match="--parallel must be a number"):
            ClientOptions(parallel=wrong)  # type: ignore[arg-type]


def test_encryption_settings_are_checked_when_the_server_starts(capsys: pytest.CaptureFixture[str]) -> None:
    bucket = ["--s3-bucket", "datasets"]
    chosen = _settings([*bucket, "--s3-sse", "aws:kms", "--s3-sse-kms-key-id", "alias/datasets"], {})
    assert (chosen.s3_sse, chosen.s3_sse_kms_key_id) == ("aws:kms", "alias/datasets")
    assert _settings(bucket, {f"{ENV_PREFIX}S3_SSE": "AES256"}).s3_sse == "AES256"
    for says, argv in {
        "--s3-sse-kms-key-id needs --s3-sse aws:kms": [*bucket, "--s3-sse", "AES256", "--s3-sse-kms-key-id", "k1"],
        "--s3-sse, --s3-sse-kms-key-id and --s3-checksum-sha256 need --s3-bucket": ["--s3-sse", "aws:kms"],
    }.items():
        with pytest.raises(CliError, match=says):
            _settings(argv, {})
    for says, argv in {
        "must be one of AES256|aws:kms, not 'kms'": [*bucket, "--s3-sse", "kms"],
        "not a KMS key id: 'key with spaces'": [
            *bucket,
            "--s3-sse",
            "aws:kms",
            "--s3-sse-kms-key-id",
            "key with spaces",
        ],
    }.items():
        with pytest.raises(SystemExit) as exited:  # the parser's usage error: one line, exit 2
            _settings(argv, {})
        assert exited.value.code == 2 and says in capsys.readouterr().err.splitlines()[-1]
