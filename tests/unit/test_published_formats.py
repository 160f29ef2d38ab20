"""The block and manifest formats published in the AsyncAPI document are the ones the code writes and
reads: every encoded block and manifest validates, and what a decoder refuses, the schema refuses."""

from __future__ import annotations

import copy
import datetime
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft7Validator

from smart_transfer.model import InvalidBlock, MetadataBlock, Multihash, decode_block
from smart_transfer.model.events import (
    _EVENT_TYPES,
    AddData,
    Checkpoint,
    DataField,
    DataSlice,
    OffsetInterval,
    Seed,
    SetDataSchema,
    SetInfo,
)
from smart_transfer.model.manifest import CheckpointFile, CheckpointManifest, decode_manifest
from smart_transfer.model.schema import block_schemas, manifest_schemas

SCHEMAS = {**block_schemas(), **manifest_schemas()}


def validator(name: str) -> Draft7Validator:
    return Draft7Validator({"$ref": f"#/components/schemas/{name}", "components": {"schemas": SCHEMAS}})


hashes = st.binary(min_size=32, max_size=32).map(lambda d: Multihash(0x12, d))
times = st.datetimes(min_value=datetime.datetime(1000, 1, 1)).map(lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
naturals = st.integers(0, 2**53)


@st.composite
def slices(draw: Any) -> DataSlice:
    start = draw(naturals)
    count = draw(st.integers(1, 10**6))
    return DataSlice(draw(hashes), draw(naturals), OffsetInterval(start, start + count - 1), count)


events = st.one_of(
    st.builds(
        Seed,
        st.binary(min_size=4, max_size=40).map(lambda b: "did:odf:f" + b.hex()),
        st.sampled_from(["root", "derivative"]),
    ),
    st.builds(AddData, st.none() | slices(), st.none() | st.builds(Checkpoint, hashes, naturals), st.none() | times),
    st.builds(SetInfo, st.text(max_size=200), st.lists(st.text(max_size=20), max_size=5).map(tuple)),
    st.lists(
        st.builds(
            DataField,
            st.text(min_size=1, max_size=20),
            st.sampled_from(["BIGINT", "STRING", "DECIMAL(10,2)"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
        unique_by=lambda f: f.name,
    ).map(lambda fields: SetDataSchema(tuple(fields))),
)
blocks = st.builds(MetadataBlock, naturals, st.none() | hashes, times, events)


def test_every_event_type_is_published() -> None:
    assert set(_EVENT_TYPES) <= set(SCHEMAS)
    published = {ref["$ref"].rsplit("/", 1)[1] for ref in SCHEMAS["MetadataEvent"]["oneOf"]}
    assert published == set(_EVENT_TYPES)


@given(blocks)
def test_every_encoded_block_fits_the_published_schema(block: MetadataBlock) -> None:
    data = block.encode()
    assert decode_block(data) == block
    assert list(validator("MetadataBlock").iter_errors(orjson.loads(data))) == []


@given(
    st.lists(
        st.tuples(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._-]{0,30}", fullmatch=True), hashes, naturals, st.booleans()),
        max_size=8,
    )
)
def test_every_encoded_manifest_fits_the_published_schema(entries: list[tuple[str, Multihash, int, bool]]) -> None:
    unique = {name: (h, size, flag) for name, h, size, flag in entries}
    manifest = CheckpointManifest(tuple(CheckpointFile(n, *unique[n]) for n in sorted(unique)))
    data = manifest.encode()
    assert decode_manifest(data) == manifest
    assert list(validator("CheckpointManifest").iter_errors(orjson.loads(data))) == []


SAMPLE_BLOCKS = [
    MetadataBlock(0, None, "2024-01-31T12:00:00Z", Seed("did:odf:f" + "ab" * 32)),
    MetadataBlock(
        1,
        Multihash.of(b"x"),
        "2024-01-31T12:00:00Z",
        AddData(DataSlice(Multihash.of(b"d"), 10, OffsetInterval(0, 4), 5), Checkpoint(Multihash.of(b"c"), 3)),
    ),
    MetadataBlock(2, Multihash.of(b"y"), "2024-01-31T12:00:00Z", SetInfo("about", ("k",))),
    MetadataBlock(
        3, Multihash.of(b"z"), "2024-01-31T12:00:00Z", SetDataSchema((DataField("offset", "BIGINT", False),))
    ),
]


def _mutations(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Each way to break a block: drop a key, add an unknown one, or give a field the wrong type."""
    broken = []
    event = obj["event"]
    optional = event["type"] == "AddData"  # every AddData field is optional: dropping one is no break
    for key in [k for k in event if k != "type" and not optional]:
        dropped = copy.deepcopy(obj)
        del dropped["event"][key]
        broken.append(dropped)
    for target in (obj, event):
        extra = copy.deepcopy(obj)
        (extra if target is obj else extra["event"])["surprise"] = 1
        broken.append(extra)
    for key in ("sequence_number", "system_time"):
        wrong = copy.deepcopy(obj)
        wrong[key] = "1.5" if key == "sequence_number" else 12
        broken.append(wrong)
    unknown = copy.deepcopy(obj)
    unknown["event"]["type"] = "Unknown"
    broken.append(unknown)
    return broken


@pytest.mark.parametrize("block", SAMPLE_BLOCKS, ids=lambda b: type(b.event).__name__)
def test_what_the_decoder_refuses_the_schema_refuses(block: MetadataBlock) -> None:
    schema = validator("MetadataBlock")
    for broken in _mutations(orjson.loads(block.encode())):
        if (
            "new_data" not in broken["event"]
            and "new_checkpoint" not in broken["event"]
            and broken["event"]["type"] == "AddData"
        ):
            continue  # every AddData field is optional: dropping one leaves a valid block
        with pytest.raises(InvalidBlock):
            decode_block(orjson.dumps(broken, option=orjson.OPT_SORT_KEYS))
        assert not schema.is_valid(broken), broken
