"""A dataset's schema as the Spark StructType JSON that Delta Sharing's ``schemaString`` carries: from the
Spark DDL types a ``SetDataSchema`` records (``BIGINT``, ``DECIMAL(10,2)``, ``ARRAY<STRING>``...), or
that a slice's Parquet footer gives (``repo.footer.footer_fields``: the same names, so one path).
Nullability is kept; column order is the slices' (``offset`` first)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import orjson

from smart_transfer.model import DataField

#: Spark DDL names of the primitive types and their JSON names.
_PRIMITIVES = {
    "BOOLEAN": "boolean",
    "TINYINT": "byte",
    "BYTE": "byte",
    "SMALLINT": "short",
    "SHORT": "short",
    "INT": "integer",
    "INTEGER": "integer",
    "BIGINT": "long",
    "LONG": "long",
    "FLOAT": "float",
    "REAL": "float",
    "DOUBLE": "double",
    "STRING": "string",
    "BINARY": "binary",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_LTZ": "timestamp",
    "TIMESTAMP_NTZ": "timestamp_ntz",
}
_TOKEN = re.compile(r"\s*(`(?:[^`]|``)*`|[A-Za-z_][A-Za-z0-9_]*|\d+|'(?:[^'\\]|\\.)*'|[<>(),:])")


class UnsupportedSchema(ValueError):
    """A type the Spark JSON schema (or this server) cannot express."""


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text.rstrip()):
        match = _TOKEN.match(text, position)
        if match is None:
            raise UnsupportedSchema(f"cannot read the type {text!r} at {position}")
        tokens.append(match.group(1))
        position = match.end()
    return tokens


class _DdlReader:
    """A recursive-descent reader of one Spark DDL type."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.at = 0

    def peek(self) -> str:
        return self.tokens[self.at] if self.at < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token == "" or (expected is not None and token.upper() != expected):
            raise UnsupportedSchema(f"cannot read the type {self.text!r}: expected {expected or 'more'}")
        self.at += 1
        return token

    def read(self) -> Any:
        name = self.take().upper()
        if name in ("DECIMAL", "DEC", "NUMERIC"):
            return self._decimal()
        if name in ("VARCHAR", "CHAR"):
            self.take("("), self.take(), self.take(")")
            return "string"
        if name == "ARRAY":
            self.take("<")
            element = self.read()
            self.take(">")
            return {"type": "array", "elementType": element, "containsNull": True}
        if name == "MAP":
            self.take("<")
            key = self.read()
            self.take(",")
            value = self.read()
            self.take(">")
            return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
        if name == "STRUCT":
            return self._struct()
        if name in _PRIMITIVES:
            return _PRIMITIVES[name]
        raise UnsupportedSchema(f"the type {self.text!r} has no Delta Sharing equivalent")

    def _decimal(self) -> str:
        if self.peek() != "(":
            return "decimal(10,0)"
        self.take("(")
        precision = self.take()
        scale = "0"
        if self.peek() == ",":
            self.take(",")
            scale = self.take()
        self.take(")")
        return f"decimal({int(precision)},{int(scale)})"

    def _struct(self) -> dict[str, Any]:
        self.take("<")
        fields = []
        while self.peek() != ">":
            name = self.take()
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            if self.peek() == ":":
                self.take(":")
            kind = self.read()
            nullable = True
            if self.peek().upper() == "NOT":
                self.take("NOT"), self.take("NULL")
                nullable = False
            if self.peek().upper() == "COMMENT":
                self.take("COMMENT"), self.take()
            fields.append(spark_field(name, kind, nullable))
            if self.peek() == ",":
                self.take(",")
        self.take(">")
        return {"type": "struct", "fields": fields}


def spark_type_of_ddl(ddl: str) -> Any:
    """The Spark JSON type of a Spark DDL type (``DECIMAL(10,2)`` -> ``"decimal(10,2)"``)."""
    reader = _DdlReader(ddl)
    kind = reader.read()
    if reader.peek():
        raise UnsupportedSchema(f"cannot read the type {ddl!r}: unexpected {reader.peek()!r}")
    return kind


def spark_field(name: str, kind: Any, nullable: bool) -> dict[str, Any]:
    """One StructField of the JSON schema."""
    return {"name": name, "type": kind, "nullable": nullable, "metadata": {}}


def schema_of_fields(fields: Sequence[DataField]) -> dict[str, Any]:
    """The StructType of the columns a SetDataSchema recorded."""
    return {"type": "struct", "fields": [spark_field(f.name, spark_type_of_ddl(f.type), f.nullable) for f in fields]}


def schema_string(schema: dict[str, Any]) -> str:
    """The ``schemaString`` of a metadata answer."""
    return orjson.dumps(schema).decode()
