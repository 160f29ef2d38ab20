"""Settings declared once. A settings class is a frozen dataclass whose every field is a :func:`setting`:
its flag, help text, default, bounds and how a command-line or environment value is read. The command
line (``cli/``), the environment, ``--help``, the README's tables and the checks at start all come from
that one declaration, so a bad value is refused when the program starts, naming the flag and its range,
and never reaches a request. Imports nothing else of the project."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from smart_transfer.config import values

T = TypeVar("T")
_KEY = "smart_transfer.setting"


class SettingError(ValueError):
    """A value outside what its setting allows; the message names the flag and the range."""


@dataclass(frozen=True)
class Declared:
    """How one setting shows on the command line and in the docs, and what values it takes."""

    flag: str
    help: str
    #: text -> value, for the command line and the environment (None: the text itself)
    parse: Callable[[str], Any] | None = None
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    #: unit shown with the range ("seconds", "bytes"); empty for counts
    unit: str = ""
    #: a switch (``--allow-anonymous``): present means True
    switch: bool = False
    #: shown as METAVAR in --help
    metavar: str | None = None
    #: False: not read from the environment (e.g. a path only meaningful on the command line)
    from_environment: bool = True

    def range_text(self) -> str:
        """The allowed values as a person reads them: ``1..65535``, ``at least 1``, ``text|json``."""
        unit = f" {self.unit}" if self.unit else ""
        if self.choices:
            return "one of " + "|".join(self.choices)
        if self.minimum is not None and self.maximum is not None:
            return f"{_number(self.minimum)}..{_number(self.maximum)}{unit}"
        if self.minimum is not None:
            return f"at least {_number(self.minimum)}{unit}"
        if self.maximum is not None:
            return f"at most {_number(self.maximum)}{unit}"
        return ""

    def check(self, value: Any) -> None:
        """Refuse a value outside the bounds or the choices (SettingError naming the flag and the range)."""
        if value is None or self.switch:
            return
        if self.choices and value not in self.choices:
            raise SettingError(f"{self.flag} must be {self.range_text()}, not {value!r}")
        numeric = self.minimum is not None or self.maximum is not None
        if numeric and (isinstance(value, bool) or not isinstance(value, int | float)):
            # the command line parses its text; an SDK caller may pass "8" where 8 is meant
            raise SettingError(f"{self.flag} must be a number ({self.range_text()}), not {value!r}")
        if isinstance(value, int | float) and not isinstance(value, bool) and not self._within(value):
            raise SettingError(f"{self.flag} must be {self.range_text()}, not {_number(value)}")

    def _within(self, value: float) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (self.minimum is None or value >= self.minimum) and (self.maximum is None or value <= self.maximum)

    def read(self, text: str) -> Any:
        """A command-line or environment text as this setting's value, checked (SettingError). Whole and
        real numbers are read by the one rule of every face (``config/values.py``: ASCII digits, never
        more digits than a Long has), then checked against the bounds."""
        readers: dict[Any, tuple[Callable[[str, str], Any], str]] = {
            int: (values.whole_number, "a whole number"),
            float: (values.real_number, "a number"),
        }
        if self.parse in readers:
            reader, kind = readers[self.parse]
            try:
                value: Any = reader(text, self.flag)
            except values.BadValue:
                wanted = f"{kind} ({self.range_text()})" if self.range_text() else kind
                raise SettingError(f"{self.flag} must be {wanted}, not {values.quoted(text)}") from None
        else:
            try:
                value = text if self.parse is None else self.parse(text)
            except (ValueError, ArithmeticError) as exc:
                raise SettingError(f"{self.flag}: {exc}") from None
        self.check(value)
        return value


def _number(value: float) -> str:
    if isinstance(value, int):
        text = str(value)
        return text if len(text) <= 24 else f"{text[:12]}…({len(text)} digits)"
    return str(int(value)) if value.is_integer() and abs(value) < 1e18 else str(value)


def setting(
    default: T,
    flag: str,
    help: str,
    *,
    parse: Callable[[str], Any] | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    unit: str = "",
    switch: bool = False,
    metavar: str | None = None,
    from_environment: bool = True,
) -> T:
    """A dataclass field that is a setting: its default and everything the command line needs."""
    if metavar is None and not choices and not switch:
        metavar = {"seconds": "SECONDS", "bytes": "SIZE"}.get(unit, "N" if parse in (int, float) else None)
    declared = Declared(flag, help, parse, minimum, maximum, choices, unit, switch, metavar, from_environment)
    declared.check(default)
    field: T = dataclasses.field(default=default, metadata={_KEY: declared})
    return field


def declarations(settings_class: type) -> Iterator[tuple[str, Any, Declared]]:
    """(field name, default, declaration) of every declared setting of a settings dataclass, in order."""
    for field in dataclasses.fields(settings_class):
        declared = field.metadata.get(_KEY)
        if declared is not None:
            yield field.name, field.default, declared


def check_settings(instance: object) -> None:
    """Check every declared field of a settings instance (call it from ``__post_init__``)."""
    for name, _, declared in declarations(type(instance)):
        declared.check(getattr(instance, name))


def environment_name(prefix: str, declared: Declared) -> str:
    """The environment variable of a setting: ``--max-sessions`` -> ``{prefix}MAX_SESSIONS``."""
    return prefix + declared.flag.lstrip("-").replace("-", "_").upper()


def markdown_table(settings_class: type, env_prefix: str | None, show: Callable[[Any], str] = str) -> str:
    """The README's table of a settings class: flag, default, allowed values, environment, meaning."""
    rows = ["| flag | default | allowed | environment | what it sets |", "|---|---|---|---|---|"]
    for _, default, declared in declarations(settings_class):
        env = environment_name(env_prefix, declared) if env_prefix and declared.from_environment else ""
        shown = "off" if declared.switch else ("none" if default is None else show(default))
        text, allowed = declared.help.replace("|", "\\|"), (declared.range_text() or "any").replace("|", "\\|")
        rows.append(f"| `{declared.flag}` | {shown} | {allowed} | {f'`{env}`' if env else ''} | {text} |")
    return "\n".join(rows)
