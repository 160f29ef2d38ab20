"""Every numeric flag of every command has declared bounds, and a value just below or above them exits 2
with one line naming the flag and its range, before the command does anything (run in a process, as a
user would, from an empty directory: nothing may be created)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from smart_transfer.cli.main import build_parser
from smart_transfer.config import Declared

CLI = [sys.executable, "-m", "smart_transfer.cli"]
ROOT = Path(__file__).resolve().parents[2]
#: Placeholder values for the positional arguments of each command, so parsing reaches the flag.
POSITIONALS = {"dataset": "d", "url": "http://127.0.0.1:9/d", "files": "f", "out": "o.csv", "subject": "s"}


def _options(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[list[str], argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _options(sub, [*path, name])
        elif action.option_strings:
            yield path, action


def _positionals(parser: argparse.ArgumentParser) -> list[str]:
    return [POSITIONALS.get(a.dest, "x") for a in parser._actions if not a.option_strings and a.nargs != 0]


def _command(path: list[str]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _numeric_flags() -> list[tuple[list[str], str, Declared]]:
    found = []
    for path, action in _options(build_parser(), []):
        declared = getattr(action.type, "declared", None)
        if declared is not None and (declared.minimum is not None or declared.maximum is not None):
            found.append((path, action.option_strings[-1], declared))
    return found


NUMERIC = _numeric_flags()
UNDECLARED_TYPES = {int, float}


def test_no_numeric_flag_escapes_the_declarations() -> None:
    loose = [
        f"{' '.join(path)} {action.option_strings[-1]}"
        for path, action in _options(build_parser(), [])
        if action.type in UNDECLARED_TYPES
    ]
    assert loose == []
    assert len(NUMERIC) > 60  # serve's, peer serve's, the client's bounds on several commands, and the rest


def _out_of_range(declared: Declared) -> list[str]:
    values = []
    if declared.minimum is not None:
        below = declared.minimum - (1 if declared.parse is int or declared.minimum >= 1 else declared.minimum / 2 + 1)
        values.append(str(int(below)) if declared.parse is int or float(below).is_integer() else str(below))
    if declared.maximum is not None:
        values.append(str(int(declared.maximum) + 1) if declared.parse is not float else str(declared.maximum * 2))
    return values


@pytest.mark.parametrize(
    ("path", "flag", "value"),
    [(path, flag, value) for path, flag, declared in NUMERIC for value in _out_of_range(declared)],
    ids=lambda item: item if isinstance(item, str) else " ".join(item),
)
def test_a_value_outside_the_bounds_exits_2_naming_the_flag_and_its_range(
    path: list[str], flag: str, value: str, tmp_path: Path
) -> None:
    command = _command(path)
    declared = next(d for p, f, d in NUMERIC if p == path and f == flag)
    result = subprocess.run(
        [*CLI, *path, *_positionals(command), f"{flag}={value}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SMART_TRANSFER_WORKSPACE": str(tmp_path / "ws")},
        timeout=60,
        check=False,
    )
    lines = result.stderr.splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and flag in lines[0], lines
    range_text = declared.range_text()
    assert range_text.split(" ")[0] in lines[0] or "negative" in lines[0], lines
    assert list(tmp_path.iterdir()) == []  # nothing was created
