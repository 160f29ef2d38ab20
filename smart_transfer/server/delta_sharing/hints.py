"""The query's hints, applied best effort as the protocol allows: predicates on the ``offset`` column
keep only the slices whose offset interval may hold a matching row, and ``limitHint`` keeps no more
slices than the limit needs. A predicate this server cannot use (another column, an operator it does
not know) keeps every slice; a ``jsonPredicateHints`` that is not a predicate tree at all is refused."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from smart_transfer.model.events import OFFSET_COLUMN
from smart_transfer.server.delta_sharing.errors import invalid
from smart_transfer.server.delta_sharing.tables import TableVersion

#: Offsets are 0..2**63-1: every interval lies within these.
LOWEST, HIGHEST = 0, 2**63 - 1
#: How deep a predicate tree may nest.
MAX_PREDICATE_DEPTH = 32
Intervals = list[tuple[int, int]]
EVERYTHING: Intervals = [(LOWEST, HIGHEST)]
_COMPARISONS = ("equal", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual")
_SQL = re.compile(r"^\s*`?offset`?\s*(=|==|<=|>=|<|>)\s*(-?\d+)\s*$", re.IGNORECASE)
_SQL_OPS = {"=": "equal", "==": "equal", "<": "lessThan", "<=": "lessThanOrEqual", ">": "greaterThan"}


def _compare(op: str, value: int) -> Intervals:
    bounds = {
        "equal": (value, value),
        "lessThan": (LOWEST, value - 1),
        "lessThanOrEqual": (LOWEST, value),
        "greaterThan": (value + 1, HIGHEST),
        "greaterThanOrEqual": (value, HIGHEST),
    }[op]
    low, high = max(bounds[0], LOWEST), min(bounds[1], HIGHEST)
    return [(low, high)] if low <= high else []


def _intersect(a: Intervals, b: Intervals) -> Intervals:
    return [(max(x[0], y[0]), min(x[1], y[1])) for x in a for y in b if max(x[0], y[0]) <= min(x[1], y[1])]


def _union(a: Intervals) -> Intervals:
    """Sorted, disjoint intervals covering ``a`` (so rows in them are counted once)."""
    merged: Intervals = []
    for low, high in sorted(a):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _leaf(node: dict[str, Any]) -> Intervals:
    """A comparison of ``offset`` with an integer literal; anything else may match any row."""
    children = node.get("children")
    if not isinstance(children, list) or len(children) != 2 or not all(isinstance(c, dict) for c in children):
        raise invalid(f"jsonPredicateHints: {node.get('op')} takes two operands")
    column, literal = children
    if column.get("op") != "column" or literal.get("op") != "literal" or column.get("name") != OFFSET_COLUMN:
        return EVERYTHING
    try:
        value = int(literal.get("value", ""))
    except (TypeError, ValueError):
        return EVERYTHING
    return _compare(str(node["op"]), value)


def _evaluate(node: Any, depth: int) -> Intervals:
    if not isinstance(node, dict) or not isinstance(node.get("op"), str):
        raise invalid("jsonPredicateHints: every node must be an object with an 'op'")
    if depth > MAX_PREDICATE_DEPTH:
        raise invalid(f"jsonPredicateHints: nested deeper than {MAX_PREDICATE_DEPTH}")
    op, children = node["op"], node.get("children", [])
    if op in ("and", "or"):
        if not isinstance(children, list) or len(children) < 2:
            raise invalid(f"jsonPredicateHints: {op} takes two or more children")
        parts = [_evaluate(child, depth + 1) for child in children]
        result = parts[0]
        for part in parts[1:]:
            result = _intersect(result, part) if op == "and" else _union(result + part)
        return result
    if op in _COMPARISONS:
        return _leaf(node)
    return EVERYTHING  # not, isNull, in, column, literal...: usable by the client only


def json_predicate_intervals(text: str | None) -> Intervals:
    """The offsets ``jsonPredicateHints`` may match (everything when absent)."""
    if text is None or not text.strip():
        return EVERYTHING
    try:
        tree = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise invalid("jsonPredicateHints is not JSON") from None
    return _evaluate(tree, 0)


def sql_predicate_intervals(hints: Sequence[str] | None) -> Intervals:
    """The offsets the (AND-ed) SQL ``predicateHints`` may match; unknown expressions are skipped."""
    result = EVERYTHING
    for hint in hints or ():
        match = _SQL.match(hint)
        if match is not None:
            op = _SQL_OPS.get(match.group(1), "greaterThanOrEqual")
            result = _intersect(result, _compare(op, int(match.group(2))))
    return result


def prune(files: list[TableVersion], intervals: Intervals, limit: int | None) -> list[TableVersion]:
    """The files that may hold a row in ``intervals``, then only as many as ``limit`` rows need."""
    kept = []
    rows = 0
    intervals = _union(intervals)
    for entry in files:
        assert entry.data is not None
        span = entry.data.offset_interval
        matching = _intersect([(span.start, span.end)], intervals)
        if not matching:
            continue
        if limit is not None and rows >= limit:
            break
        kept.append(entry)
        rows += sum(high - low + 1 for low, high in matching)  # rows that may match, counted once
    return kept
