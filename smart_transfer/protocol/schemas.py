"""JSON schemas of the protocol's records (messages, error details) for both documents: msgspec's
schema, with each description a docstring's text rather than its source indentation."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import Any

import msgspec

REF_TEMPLATE = "#/components/schemas/{name}"


def _cleaned(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: inspect.cleandoc(value) if key == "description" and isinstance(value, str) else _cleaned(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_cleaned(value) for value in node]
    return node


def schema_components(records: Iterable[type[Any]]) -> dict[str, Any]:
    """The ``components/schemas`` of ``records`` and of every record they hold, by name."""
    _, components = msgspec.json.schema_components(list(records), ref_template=REF_TEMPLATE)
    cleaned: dict[str, Any] = _cleaned(components)
    return cleaned
