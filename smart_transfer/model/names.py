"""Dataset names: the one check that keeps every path and key inside its dataset's prefix."""

from __future__ import annotations

import re

from smart_transfer.model.errors import InvalidDatasetName

#: Letters and digits in runs joined by single '-', '.' or '_': no '/', no '..', no leading dot,
#: no percent-encoding, no whitespace or NUL, nothing outside ASCII (so no unicode look-alikes).
DATASET_NAME_PATTERN = r"^[A-Za-z0-9]+(?:[-._][A-Za-z0-9]+)*$"
_NAME = re.compile(DATASET_NAME_PATTERN)
MAX_NAME_LENGTH = 100
#: Names the server uses for its own routes and keys.
RESERVED_NAMES = frozenset({"_store", "_index", "docs", "openapi.json", "redoc", "healthz", "readyz", "metrics"})


class DatasetName(str):
    """A validated dataset name; constructing one is the validation."""

    __slots__ = ()

    def __new__(cls, value: str) -> DatasetName:
        if not isinstance(value, str):
            raise InvalidDatasetName("a dataset name must be text")
        if not value or len(value) > MAX_NAME_LENGTH or _NAME.match(value) is None or value.endswith("\n"):
            shown = value if len(value) <= 60 else value[:57] + "..."
            raise InvalidDatasetName(
                f"invalid dataset name {shown!r}: use 1-{MAX_NAME_LENGTH} ASCII letters and digits, "
                "optionally joined by single '-', '.' or '_'"
            )
        if value.lower() in RESERVED_NAMES:
            raise InvalidDatasetName(f"dataset name {value!r} is reserved")
        return super().__new__(cls, value)
