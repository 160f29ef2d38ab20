"""The SetDataSchema event: exact round trips through block bytes, and malformed schemas refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import DataField, InvalidBlock, MetadataBlock, SetDataSchema, decode_block
from smart_transfer.model.encoding import canonical_bytes

TIME = "2024-01-31T12:00:00.000001Z"
fields = st.builds(
    DataField,
    st.text(min_size=1, max_size=30),
    st.sampled_from(["BIGINT", "INT", "STRING", "DECIMAL(10,2)", "TIMESTAMP", "ARRAY<STRING>", "STRUCT<a: INT>"]),
    st.booleans(),
)
schemas = st.lists(fields, min_size=1, max_size=20, unique_by=lambda f: f.name).map(
    lambda items: SetDataSchema(tuple(items))
)


@given(schemas)
def test_schema_blocks_round_trip_exactly(schema: SetDataSchema) -> None:
    block = MetadataBlock(1, None, TIME, schema)
    decoded = decode_block(block.encode())
    assert decoded.event == schema
    assert decoded.encode() == block.encode()


def test_schema_block_bytes_are_documented_form() -> None:
    schema = SetDataSchema((DataField("offset", "BIGINT", False), DataField("id", "STRING")))
    assert canonical_bytes(schema.to_dict()) == (
        b'{"fields":[{"name":"offset","nullable":false,"type":"BIGINT"},'
        b'{"name":"id","nullable":true,"type":"STRING"}],"type":"SetDataSchema"}'
    )


@pytest.mark.parametrize(
    ("event", "fragment"),
    [
        ({"type": "SetDataSchema", "fields": []}, "1-1000 fields"),
        ({"type": "SetDataSchema", "fields": "id"}, "expected a list"),
        ({"type": "SetDataSchema", "fields": [1]}, "expected an object"),
        ({"type": "SetDataSchema", "fields": [{"name": "", "type": "INT", "nullable": True}]}, "name must be"),
        ({"type": "SetDataSchema", "fields": [{"name": "a", "type": "INT", "nullable": 1}]}, "true or false"),
        ({"type": "SetDataSchema", "fields": [{"name": "a", "type": "INT"}]}, "missing field"),
        (
            {
                "type": "SetDataSchema",
                "fields": [
                    {"name": "a", "type": "INT", "nullable": True},
                    {"name": "a", "type": "INT", "nullable": True},
                ],
            },
            "unique",
        ),
    ],
)
def test_malformed_schemas_are_refused_with_a_reason(event: dict[str, object], fragment: str) -> None:
    data = canonical_bytes(
        {"sequence_number": 1, "prev_block_hash": None, "system_time": TIME, "event": event},
    )
    with pytest.raises(InvalidBlock, match=fragment):
        decode_block(data)
