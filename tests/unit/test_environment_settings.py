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
