"""The sans-I/O protocol: codec round trips, transition tables under random sequences, tarballs."""

from __future__ import annotations

import gzip
import io
import tarfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import Multihash
from smart_transfer.protocol import codec
from smart_transfer.protocol import messages as m
from smart_transfer.protocol.errors import ErrorCode, ProtocolError
from smart_transfer.protocol.flows import FLOWS, TARBALL, Conversation, Phase, Sender
from smart_transfer.protocol.tarball import pack_blocks, unpack_blocks

hashes = st.binary(min_size=32, max_size=32).map(lambda d: str(Multihash(0x12, d)))
plans = st.builds(
    m.TransferPlan,
    num_blocks=st.integers(0, 10**9),
    num_objects=st.integers(0, 10**9),
    bytes_in_objects=st.integers(0, 10**15),
)
object_files = st.builds(
    m.ObjectFile,
    kind=st.sampled_from(["data", "checkpoints"]),
    physical_hash=hashes,
    size=st.integers(0, 10**12),
    md5=st.none() | st.just("1B2M2Y8AsgTpgAmY7PhCfg=="),
)
requests = st.builds(
    m.HttpRequest,
    method=st.sampled_from(["GET", "PUT"]),
    url=st.text(max_size=50),
    headers=st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
    expires_at=st.integers(0, 2**40),
)
messages = st.one_of(
    st.builds(m.Error, code=st.sampled_from(list(ErrorCode)), message=st.text(max_size=100)),
    st.builds(m.Progress, objects_done=st.integers(0, 10**9), bytes_done=st.integers(0, 10**12)),
    st.builds(
        m.DatasetPullRequest,
        begin_after=st.none() | hashes,
        stop_at=st.none() | hashes,
        force_update_if_diverged=st.booleans(),
    ),
    st.builds(
        m.DatasetPullResponse,
        head=hashes,
        begin_after=st.none() | hashes,
        transfer_plan=plans,
        max_objects_per_page=st.integers(1, 10**6),
    ),
    st.builds(m.DatasetPullObjectsTransferRequest, object_files=st.lists(object_files, min_size=1, max_size=3)),
    st.builds(
        m.DatasetPullObjectsTransferResponse,
        object_transfers=st.lists(
            st.builds(m.PullObjectTransfer, object_file=object_files, download=requests), max_size=3
        ),
    ),
    st.builds(
        m.DatasetPushRequest,
        current_head=st.none() | hashes,
        transfer_plan=plans,
        force_update_if_diverged=st.booleans(),
    ),
    st.builds(
        m.DatasetPushObjectsTransferResponse,
        object_transfers=st.lists(
            st.builds(
                m.PushObjectTransfer,
                object_file=object_files,
                transfer=st.one_of(st.just(m.SkipUpload()), st.builds(m.HttpUpload, request=requests)),
            ),
            max_size=3,
        ),
    ),
    st.builds(m.DatasetPushCompleteConfirmed, old_head=st.none() | hashes, new_head=hashes),
    st.just(m.DatasetPullMetadataRequest()),
    st.just(m.DatasetPullComplete()),
    st.just(m.DatasetPushComplete()),
)


@given(messages)
def test_every_message_round_trips_through_the_codec(message: m.Message) -> None:
    assert codec.decode(codec.encode(message)) == message


@given(st.text(max_size=300) | st.binary(max_size=300))
def test_arbitrary_frames_decode_or_raise_a_typed_error(frame: str | bytes) -> None:
    try:
        codec.decode(frame)
    except ProtocolError as exc:
        assert exc.code in (ErrorCode.BAD_MESSAGE, ErrorCode.MESSAGE_TOO_LARGE)


MESSAGE_TYPES = sorted({kind for table in FLOWS.values() for (_, _, kind) in table} | {"Error", "Bogus"})


@given(
    st.sampled_from(sorted(FLOWS)),
    st.lists(st.tuples(st.sampled_from(list(Sender)), st.sampled_from(MESSAGE_TYPES)), max_size=30),
)
def test_random_sequences_follow_the_table_or_fail_typed(flow: str, steps: list[tuple[Sender, str]]) -> None:
    conversation = Conversation(flow)
    for sender, kind in steps:
        before = conversation.phase
        allowed = FLOWS[flow].get((before, sender, kind))
        try:
            after = conversation.advance(sender, kind)
        except ProtocolError as exc:
            assert allowed is None
            assert exc.code is ErrorCode.UNEXPECTED_MESSAGE
            assert before.value in exc.message and kind in exc.message
            assert conversation.phase is before  # a refused message changes nothing
            continue
        if kind == "Error" and before not in (Phase.DONE, Phase.FAILED):
            assert after is Phase.FAILED
        else:
            assert after is allowed


@pytest.mark.parametrize("flow", sorted(FLOWS))
def test_every_phase_of_each_flow_is_reachable_and_can_end(flow: str) -> None:
    table = FLOWS[flow]
    reachable = {Phase.AWAIT_REQUEST}
    frontier = [Phase.AWAIT_REQUEST]
    while frontier:
        phase = frontier.pop()
        for (source, _, _), target in table.items():
            if source is phase and target not in reachable:
                reachable.add(target)
                frontier.append(target)
    assert Phase.DONE in reachable
    used = {source for (source, _, _) in table} | set(table.values())
    assert used == reachable


def test_happy_pull_and_push_sequences() -> None:
    pull = Conversation("pull")
    for sender, kind in [
        (Sender.CLIENT, "DatasetPullRequest"),
        (Sender.SERVER, "DatasetPullResponse"),
        (Sender.CLIENT, "DatasetPullMetadataRequest"),
        (Sender.SERVER, TARBALL),
        (Sender.CLIENT, "DatasetPullObjectsTransferRequest"),
        (Sender.SERVER, "DatasetPullObjectsTransferResponse"),
        (Sender.CLIENT, "Progress"),
        (Sender.CLIENT, "DatasetPullComplete"),
    ]:
        pull.advance(sender, kind)
    assert pull.phase is Phase.DONE
    push = Conversation("push")
    for sender, kind in [
        (Sender.CLIENT, "DatasetPushRequest"),
        (Sender.SERVER, "DatasetPushRequestAccepted"),
        (Sender.CLIENT, TARBALL),
        (Sender.SERVER, "DatasetPushMetadataAccepted"),
        (Sender.CLIENT, "DatasetPushComplete"),
        (Sender.SERVER, "Progress"),
        (Sender.SERVER, "DatasetPushCompleteConfirmed"),
    ]:
        push.advance(sender, kind)
    assert push.phase is Phase.DONE


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_tarballs_round_trip_in_order(contents: list[bytes]) -> None:
    blocks = [(Multihash.of(c), c) for c in contents]
    manifests = [(Multihash.of(b"m" + c), b"m" + c) for c in contents[:3]]
    bundle = unpack_blocks(pack_blocks(blocks, manifests))
    assert bundle.blocks == blocks
    assert bundle.manifests == dict(manifests)


def _tar(entries: list[tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue())


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not gzip", "malformed"),
        (gzip.compress(b"not a tar" * 100), "malformed"),
        (_tar([("000000000-" + str(Multihash.of(b"a")), b"b")]), "does not match its hash"),
        (_tar([("000000001-" + str(Multihash.of(b"a")), b"a")]), "out of order"),
        (_tar([("../../etc/passwd", b"a")]), "out of order"),
        (
            _tar([("manifest-" + str(Multihash.of(b"m")), b"m"), ("000000000-" + str(Multihash.of(b"a")), b"a")]),
            "out of order",
        ),
        (_tar([("manifest-" + str(Multihash.of(b"m")), b"x")]), "manifest .* does not match its hash"),
        (_tar([("000000000-" + str(Multihash.of(b"a" * 70000)), b"a" * 70000)]), "not a block"),
        (gzip.compress(b"\0" * (2 * 1024 * 1024)), "expands beyond"),
    ],
)
def test_hostile_tarballs_are_refused(data: bytes, fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment) as caught:
        unpack_blocks(data, max_expanded_bytes=1024 * 1024)
    assert caught.value.code is ErrorCode.INVALID_BLOCKS
