"""Properties of the dataset model: multihash text, canonical encoding, blocks and chain rules."""

from __future__ import annotations

import hashlib
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import (
    SHA2_256,
    SHA3_256,
    AddData,
    ChainRuleViolation,
    Checkpoint,
    DataSlice,
    InvalidBlock,
    InvalidDatasetName,
    InvalidMultihash,
    MetadataBlock,
    Multihash,
    OffsetInterval,
    Seed,
    SetInfo,
    decode_block,
    validate_chain,
)
from smart_transfer.model.encoding import canonical_bytes
from smart_transfer.model.names import DatasetName

TIME = "2024-01-31T12:00:00.000001Z"
hashes = st.builds(Multihash, st.sampled_from([SHA2_256, SHA3_256]), st.binary(min_size=32, max_size=32))
text = st.text(max_size=50)
timestamps = st.datetimes(min_value=datetime(1970, 1, 1)).map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
intervals = st.tuples(st.integers(0, 2**40), st.integers(0, 2**20)).map(lambda t: OffsetInterval(t[0], t[0] + t[1]))
slices = st.builds(
    lambda h, size, iv: DataSlice(h, size, iv, iv.end - iv.start + 1), hashes, st.integers(0, 2**40), intervals
)
events = st.one_of(
    st.builds(
        Seed,
        st.binary(min_size=8, max_size=32).map(lambda b: "did:odf:f" + b.hex()),
        st.sampled_from(["root", "derivative"]),
    ),
    st.builds(
        AddData,
        st.none() | slices,
        st.none() | st.builds(Checkpoint, hashes, st.integers(0, 2**40)),
        st.none() | timestamps,
    ),
    st.builds(SetInfo, text, st.lists(st.text(max_size=20), max_size=5).map(tuple)),
)
blocks = st.builds(MetadataBlock, st.integers(0, 2**40), st.none() | hashes, timestamps, events)


@given(hashes)
def test_multihash_text_round_trips(mh: Multihash) -> None:
    assert Multihash.parse(str(mh)) == mh
    assert str(mh).startswith("f1220" if mh.code == SHA2_256 else "f1620")


@given(st.binary(max_size=1000))
def test_multihash_of_matches_hashlib_sha256(data: bytes) -> None:
    mh = Multihash.of(data)
    assert mh.digest == hashlib.sha256(data).digest()
    assert mh.matches(data)
    assert not mh.matches(data + b"x")
    assert Multihash.of(data, SHA3_256).digest == hashlib.sha3_256(data).digest()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "f1220",
        "F1220" + "a" * 64,
        "m1220" + "a" * 64,
        "f1220" + "A" * 64,
        "f1220" + "g" * 64,
        "f1120" + "a" * 64,
        "f1221" + "a" * 64,
        "f1220" + "a" * 66,
        "../etc/passwd",
        "f1220" + "a" * 63 + "\0",
        "f1220" + "a" * 32 + " " + "a" * 31,
        "f1220" + "a" * 62 + "\n" + "a",
        "f1220" + "a" * 63 + "é",
        "f1220" + "a" * 10 + "A" + "a" * 53,
    ],
)
def test_malformed_multihash_text_is_refused(text: str) -> None:
    with pytest.raises(InvalidMultihash):
        Multihash.parse(text)


@given(blocks)
def test_block_encode_decode_round_trip(block: MetadataBlock) -> None:
    data = block.encode()
    decoded = decode_block(data)
    assert decoded == block
    assert decoded.encode() == data
    assert decoded.hash() == block.hash() == Multihash.of(data)


@given(blocks)
def test_block_bytes_do_not_depend_on_key_order(block: MetadataBlock) -> None:
    forward = block.to_dict()
    backward = dict(reversed(list(forward.items())))
    backward["event"] = dict(reversed(list(forward["event"].items())))
    assert canonical_bytes(forward) == canonical_bytes(backward)


def test_block_hash_is_stable_across_versions() -> None:
    # Pinned: if the canonical encoding ever changes, every stored dataset's addresses would change.
    block = MetadataBlock(0, None, TIME, Seed("did:odf:f" + "ab" * 16, "root"))
    assert block.encode() == (
        b'{"event":{"dataset_id":"did:odf:fabababababababababababababababab","kind":"root","type":"Seed"},'
        b'"prev_block_hash":null,"sequence_number":0,"system_time":"2024-01-31T12:00:00.000001Z"}'
    )
    assert str(block.hash()) == "f1220" + hashlib.sha256(block.encode()).hexdigest()


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"[]", "JSON object"),
        (b"not json", "not JSON"),
        (b'{"sequence_number":0}', "missing field"),
        (
            b'{"event":{"type":"Seed","dataset_id":"did:odf:fabababab","kind":"root"},"extra":1,'
            b'"prev_block_hash":null,"sequence_number":0,"system_time":"2024-01-31T12:00:00Z"}',
            "unknown field",
        ),
        (
            b'{"event":{"type":"Nope"},"prev_block_hash":null,"sequence_number":0,'
            b'"system_time":"2024-01-31T12:00:00Z"}',
            "unknown event type",
        ),
        (
            b'{"event":{"type":"SetInfo","description":"x","keywords":[]},"prev_block_hash":null,'
            b'"sequence_number":1.5,"system_time":"2024-01-31T12:00:00Z"}',
            "floats",
        ),
        (
            b'{"event":{"type":"SetInfo","description":"x","keywords":[]},"prev_block_hash":null,'
            b'"sequence_number":-1,"system_time":"2024-01-31T12:00:00Z"}',
            ">= 0",
        ),
        (
            b'{"event":{"type":"SetInfo","description":"x","keywords":[]},"prev_block_hash":null,'
            b'"sequence_number":1,"system_time":"yesterday"}',
            "timestamp",
        ),
        (
            b'{"sequence_number":1, "event":{"description":"x","keywords":[],"type":"SetInfo"},'
            b'"prev_block_hash":null,"system_time":"2024-01-31T12:00:00Z"}',
            "canonical",
        ),
        (b"{" + b" " * 70000 + b"}", "limit"),
        (
            b'{"event":{"new_data":null,"new_watermark":"2024-01-31T12:00:00Z","type":"AddData"},'
            b'"prev_block_hash":null,"sequence_number":1,"system_time":"2024-01-31T12:00:00Z"}',
            "canonical",
        ),
        (
            b'{"event":{"description":"x","keywords":[],"type":"SetInfo"},"prev_block_hash":null,'
            b'"sequence_number":9223372036854775808,"system_time":"2024-01-31T12:00:00Z"}',
            "out of range",
        ),
        (
            b'{"event":{"description":1.5,"keywords":[],"type":"SetInfo"},"prev_block_hash":null,'
            b'"sequence_number":1,"system_time":"2024-01-31T12:00:00Z"}',
            "expected text",
        ),
        (
            b'{"event":{"description":"x","keywords":[2.5],"type":"SetInfo"},"prev_block_hash":null,'
            b'"sequence_number":1,"system_time":"2024-01-31T12:00:00Z"}',
            "list of text",
        ),
        (
            b'{"event":{"description":"x","keywords":[],"type":"SetInfo"},"prev_block_hash":null,'
            b'"sequence_number":1,"system_time":"2024-01-31T12:00:00Z","extra":true}',
            "unknown field",
        ),
    ],
)
def test_malformed_blocks_are_refused_with_a_reason(data: bytes, fragment: str) -> None:
    with pytest.raises(InvalidBlock, match=fragment):
        decode_block(data)


def _chain(n: int) -> list[tuple[Multihash, MetadataBlock]]:
    out: list[tuple[Multihash, MetadataBlock]] = []
    prev: Multihash | None = None
    offset = 0
    for seq in range(n):
        if seq == 0:
            event: Seed | AddData = Seed("did:odf:f" + "cd" * 16)
        else:
            event = AddData(DataSlice(Multihash.of(bytes([seq])), 10, OffsetInterval(offset, offset + 4), 5))
            offset += 5
        block = MetadataBlock(seq, prev, TIME, event)
        prev = block.hash()
        out.append((prev, block))
    return out


@given(st.integers(1, 30))
def test_valid_chains_are_accepted(n: int) -> None:
    tip = validate_chain(_chain(n))
    assert tip is not None
    assert tip.sequence_number == n - 1
    assert tip.next_offset == 5 * (n - 1)


@given(st.integers(2, 12), st.data())
def test_each_broken_rule_is_named_with_its_block(n: int, data: st.DataObject) -> None:
    chain = _chain(n)
    at = data.draw(st.integers(1, n - 1))
    rule = data.draw(st.sampled_from(["sequence", "prev-hash", "offsets", "single-seed", "content-address"]))
    _, block = chain[at]
    prev = chain[at - 1][0]
    broken: list[tuple[Multihash, MetadataBlock]]
    if rule == "sequence":
        bad = MetadataBlock(block.sequence_number + 1, prev, TIME, block.event)
        broken = [*chain[:at], (bad.hash(), bad)]
    elif rule == "prev-hash":
        bad = MetadataBlock(block.sequence_number, Multihash.of(b"elsewhere"), TIME, block.event)
        broken = [*chain[:at], (bad.hash(), bad)]
    elif rule == "offsets":
        bad = MetadataBlock(
            block.sequence_number,
            prev,
            TIME,
            AddData(DataSlice(Multihash.of(b"x"), 1, OffsetInterval(10**9, 10**9), 1)),
        )
        broken = [*chain[:at], (bad.hash(), bad)]
    elif rule == "single-seed":
        bad = MetadataBlock(block.sequence_number, prev, TIME, Seed("did:odf:f" + "ef" * 16))
        broken = [*chain[:at], (bad.hash(), bad)]
    else:
        broken = [*chain[:at], (Multihash.of(b"not this block"), block)]
    with pytest.raises(ChainRuleViolation) as caught:
        validate_chain(broken)
    assert caught.value.rule == rule
    assert caught.value.sequence_number == broken[-1][1].sequence_number
    assert caught.value.block_hash == str(broken[-1][0])


def test_first_block_must_be_a_seed() -> None:
    block = MetadataBlock(0, None, TIME, SetInfo("x"))
    with pytest.raises(ChainRuleViolation, match="seed-first"):
        validate_chain([(block.hash(), block)])


def test_floats_are_refused_by_the_serializer() -> None:
    with pytest.raises(InvalidBlock, match="floats"):
        canonical_bytes({"a": 1.0})


@pytest.mark.parametrize(
    "name",
    [
        "",
        ".",
        "..",
        "../x",
        "a/b",
        "/abs",
        "a\\b",
        "%2e%2e",
        "a%2Fb",
        "a..b",
        ".hidden",
        "a b",
        "a\0b",
        "\uff41\uff42\uff43",
        "d\u0430ta",
        "x" * 101,
        "-lead",
        "trail-",
        "_store",
        "docs",
    ],
)
def test_dataset_names_that_could_escape_are_refused(name: str) -> None:
    with pytest.raises(InvalidDatasetName):
        DatasetName(name)


@pytest.mark.parametrize("name", ["a", "my-dataset", "com.example.data", "v1_2", "A9"])
def test_ordinary_dataset_names_are_accepted(name: str) -> None:
    assert DatasetName(name) == name
