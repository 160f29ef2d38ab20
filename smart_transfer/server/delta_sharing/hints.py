"""The query's hints, applied best effort as the protocol allows: a predicate (``jsonPredicateHints``, else
the AND-ed SQL ``predicateHints``) keeps only the files whose statistics say a row may match, and
``limitHint`` (with no predicate) keeps no more files than the limit's rows need. Conservative by
construction: a column without statistics, an operator this server does not evaluate (``not``, ``<>``),
a literal that does not compare exactly with the column's values (``config/literals.py``: NaN,
infinities, finer than the column, another type): the predicate is unknown and the file stays. A
``jsonPredicateHints`` that is not a predicate tree at all is refused."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from smart_transfer.config.literals import hint_literal
from smart_transfer.repo.footer_stats import ColumnStats, SliceStats
from smart_transfer.server.delta_sharing.errors import invalid

T = TypeVar("T")
#: How deep a predicate tree may nest.
MAX_PREDICATE_DEPTH = 32
#: Whether a file (by its statistics) may hold a matching row.
Predicate = Callable[[SliceStats], bool]
_COMPARISONS = ("equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual")
_FLIPPED = {"lessThan": "greaterThan", "lessThanOrEqual": "greaterThanOrEqual", "equal": "equal"}
_FLIPPED.update({v: k for k, v in _FLIPPED.items()})
_LITERAL = r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|(?:date|timestamp)?\s*'(?:[^']|'')*'"
_SQL = re.compile(rf"^\s*(`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)\s*(=|==|<=|>=|<|>)\s*({_LITERAL})\s*$", re.IGNORECASE)
_SQL_OPS = {"=": "equal", "==": "equal", "<": "lessThan", "<=": "lessThanOrEqual", ">": "greaterThan"}


def _always(stats: SliceStats) -> bool:
    return True


def may_hold(op: str, column: ColumnStats, value: Any) -> bool:
    """Whether a file with ``column``'s bounds may hold a row where ``column op value``."""
    low, high = column.low, column.high
    if op in ("greaterThan", "greaterThanOrEqual", "equal") and high is None:
        return True
    if op in ("lessThan", "lessThanOrEqual", "equal") and low is None:
        return True
    if column.kind == "float" and op in ("greaterThan", "greaterThanOrEqual"):
        return True  # NaN, which footers leave out of their bounds, is greater than every number in SQL
    checks: dict[str, Callable[[], bool]] = {
        "equal": lambda: bool(low <= value <= high),
        "lessThan": lambda: bool(low < value),
        "lessThanOrEqual": lambda: bool(low <= value),
        "greaterThan": lambda: bool(high > value),
        "greaterThanOrEqual": lambda: bool(high >= value),
    }
    return checks[op]()


def _find(stats: SliceStats, name: str) -> ColumnStats | None:
    """The column named ``name`` (Spark resolves names without regard to case: so do we, if unique)."""
    if name in stats.columns:
        return stats.columns[name]
    same = [c for n, c in stats.columns.items() if n.lower() == name.lower()]
    return same[0] if len(same) == 1 else None


def comparison(op: str, name: str, text: str, value_type: str | None) -> Predicate:
    """``name op literal`` as a test of a file's statistics."""

    def test(stats: SliceStats) -> bool:
        column = _find(stats, name)
        if column is None:
            return True
        value = hint_literal(column.kind, text, value_type)  # the one rule; None: unknown
        if value is None:
            return True
        try:
            return may_hold(op, column, value)
        except (TypeError, ArithmeticError):  # bounds of a kind the literal does not compare with: unknown
            return True

    return test


def _operands(node: dict[str, Any], count: int) -> list[dict[str, Any]]:
    children = node.get("children")
    if not isinstance(children, list) or len(children) != count or not all(isinstance(c, dict) for c in children):
        raise invalid(f"jsonPredicateHints: {node.get('op')} takes {count} operand(s)")
    return children


def _leaf(node: dict[str, Any]) -> Predicate:
    """A comparison of a column with a literal (either side); anything else may match any row."""
    column, literal = _operands(node, 2)
    op = str(node["op"])
    if column.get("op") == "literal" and literal.get("op") == "column":
        column, literal, op = literal, column, _FLIPPED[op]
    name, text, value_type = column.get("name"), literal.get("value"), literal.get("valueType")
    shaped = column.get("op") == "column" and literal.get("op") == "literal"
    typed = isinstance(name, str) and isinstance(text, str) and (value_type is None or isinstance(value_type, str))
    if not (shaped and typed):
        return _always
    return comparison(op, str(name), str(text), value_type)


def _is_null(node: dict[str, Any]) -> Predicate:
    (operand,) = _operands(node, 1)
    name = operand.get("name")
    if operand.get("op") != "column" or not isinstance(name, str):
        return _always

    def test(stats: SliceStats) -> bool:
        column = _find(stats, name)
        return column is None or column.nulls is None or column.nulls > 0

    return test


def _junction(op: str, children: Any, depth: int) -> Predicate:
    if not isinstance(children, list) or len(children) < 2:
        raise invalid(f"jsonPredicateHints: {op} takes two or more children")
    parts = [_compile(child, depth + 1) for child in children]
    if op == "and":
        return lambda stats: all(part(stats) for part in parts)
    return lambda stats: any(part(stats) for part in parts)


def _compile(node: Any, depth: int) -> Predicate:
    if not isinstance(node, dict) or not isinstance(node.get("op"), str):
        raise invalid("jsonPredicateHints: every node must be an object with an 'op'")
    if depth > MAX_PREDICATE_DEPTH:
        raise invalid(f"jsonPredicateHints: nested deeper than {MAX_PREDICATE_DEPTH}")
    op = node["op"]
    if op in ("and", "or"):
        return _junction(op, node.get("children", []), depth)
    if op in _COMPARISONS:
        return _leaf(node)
    if op == "isNull":
        return _is_null(node)
    return _always  # not, in, column, literal...: usable by the client only


def json_predicate(text: str | None) -> Predicate | None:
    """The test ``jsonPredicateHints`` makes of a file (None when absent)."""
    if text is None or not text.strip():
        return None
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise invalid("jsonPredicateHints is not JSON") from None
    return _compile(tree, 0)


def _sql_literal(text: str) -> tuple[str, str | None]:
    """A SQL literal's text and value type (``date '…'``, ``timestamp '…'``, ``'…'``, a number)."""
    if not text.endswith("'"):
        return text, "number"
    kind, _, quoted = text.partition("'")
    unquoted = quoted[:-1].replace("''", "'")
    return unquoted, (kind.strip().lower() or "string")


def sql_predicate(hints: Sequence[str] | None) -> Predicate | None:
    """The test the AND-ed SQL ``predicateHints`` make of a file (expressions not understood: skipped)."""
    parts: list[Predicate] = []
    for hint in hints or ():
        match = _SQL.match(hint)
        if match is not None:
            name = match.group(1)
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            text, value_type = _sql_literal(match.group(3))
            op = _SQL_OPS.get(match.group(2), "greaterThanOrEqual")
            parts.append(comparison(op, name, text, value_type))
    if not parts:
        return None
    return lambda stats: all(part(stats) for part in parts)


def prune(files: list[T], stats: list[SliceStats], predicate: Predicate | None, limit: int | None) -> list[T]:
    """The files whose statistics may hold a row the predicate keeps; with no predicate, only as many as
    ``limit`` rows need (with one, every file that may match: a file's rows may all fail it)."""
    if predicate is not None:
        return [entry for entry, numbers in zip(files, stats, strict=True) if predicate(numbers)]
    if limit is None:
        return list(files)
    kept, rows = [], 0
    for entry, numbers in zip(files, stats, strict=True):
        if rows >= limit:
            break
        kept.append(entry)
        rows += numbers.num_records
    return kept
