"""Declared settings on the command line: each :func:`smart_transfer.config.setting` of a settings class
becomes one option (its flag, help with range, default and environment variable), and the parsed
options, the environment and the defaults become one checked settings object. A bad value exits 2 with
one line naming the flag and its range, before anything starts."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

from smart_transfer.cli.exits import EXIT_USAGE, CliError
from smart_transfer.config import Declared, SettingError, declarations, environment_name

S = TypeVar("S")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


def _argument_type(declared: Declared) -> Callable[[str], Any]:
    def read(text: str) -> Any:
        try:
            return declared.read(text)
        except SettingError as exc:  # argparse prefixes "argument --flag: "
            message = str(exc).removeprefix(f"{declared.flag}: ").removeprefix(f"{declared.flag} ")
            raise argparse.ArgumentTypeError(message) from None

    read.__name__ = declared.flag  # argparse names the type in some messages
    read.declared = declared  # type: ignore[attr-defined]  # the bounds, for tests that walk every flag
    return read


def _help(declared: Declared, default: Any, env: str | None) -> str:
    bits = [declared.help]
    if declared.range_text() and not declared.choices:
        bits.append(f"({declared.range_text()})")
    if not declared.switch and default not in (None, ""):
        bits.append(f"(default: {default})")
    if env:
        bits.append(f"[${env}]")
    return " ".join(bits).replace("%", "%%")


def add_settings(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    settings_class: type,
    env_prefix: str | None,
    only: Collection[str] = (),
) -> None:
    """One option per declared setting of ``settings_class`` (or of the fields named in ``only``)."""
    for name, default, declared in declarations(settings_class):
        if only and name not in only:
            continue
        env = environment_name(env_prefix, declared) if env_prefix and declared.from_environment else None
        text = _help(declared, default, env)
        if declared.switch:
            parser.add_argument(declared.flag, dest=name, action="store_true", default=None, help=text)
            continue
        parser.add_argument(
            declared.flag,
            dest=name,
            type=_argument_type(declared),
            choices=declared.choices or None,
            default=None,
            metavar=declared.metavar,
            help=text,
        )


def _from_environment(declared: Declared, env: str, text: str) -> Any:
    if declared.switch:
        lowered = text.strip().lower()
        if lowered not in _TRUE + _FALSE:
            raise SettingError(f"${env} must be 1/true/yes or 0/false/no (it sets {declared.flag})")
        return lowered in _TRUE
    try:
        return declared.read(text)
    except SettingError as exc:
        raise SettingError(f"${env}: {exc}") from None


def settings_from(
    args: argparse.Namespace,
    settings_class: Callable[..., S],
    env_prefix: str | None,
    environ: Mapping[str, str] | None = None,
    **fixed: Any,
) -> S:
    """The settings the command line gives (else the environment, else the default), checked: a value
    outside its bounds is a usage error (exit 2) naming the flag and the range."""
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    try:
        for name, _, declared in declarations(settings_class):  # type: ignore[arg-type]
            given = getattr(args, name, None)
            env = environment_name(env_prefix, declared) if env_prefix and declared.from_environment else None
            if given is not None:
                values[name] = given
            elif env and environ.get(env, "").strip():  # an empty variable is unset (`VAR= cmd` clears it)
                values[name] = _from_environment(declared, env, environ[env])
        return settings_class(**{**values, **fixed})
    except (SettingError, ValueError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def add_bounded(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    *flags: str,
    default: Any,
    help: str,
    parse: Callable[[str], Any],
    minimum: float | None = None,
    maximum: float | None = None,
    unit: str = "",
    metavar: str | None = None,
) -> None:
    """A numeric option of one command (not a setting of a settings class) with the same bounds, help and
    one-line errors as the declared ones."""
    declared = Declared(flags[-1], help, parse, minimum, maximum, unit=unit, metavar=metavar)
    declared.check(default)
    text = _help(declared, default, None)
    parser.add_argument(*flags, type=_argument_type(declared), default=default, metavar=metavar or "N", help=text)
