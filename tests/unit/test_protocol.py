"""The sans-I/O protocol: codec round trips, transition tables under random sequences, tarballs."""

from __future__ import annotations

import gzip
import io
import tarfile

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.model import Multihash
from smart_transfer.model.pack import encode_pack
from smart_transfer.protocol import codec
from smart_transfer.protocol import messages as m
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.connection import (
    CLOSE_INTERNAL_ERROR,
    CLOSE_MESSAGE_TOO_BIG,
    CLOSE_POLICY_VIOLATION,
    CLOSE_TRY_AGAIN_LATER,
    MAX_CLOSE_REASON_BYTES,
    Connection,
    PeerError,
)
from smart_transfer.protocol.errors import MessageTooLargeDetails, ProtocolError, UnexpectedMessageDetails
from smart_transfer.protocol.flows import FLOWS, MESSAGES, Phase, Sender, messages_of
from smart_transfer.protocol.tarball import unpack_blocks

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
    part_md5s=st.none() | st.lists(st.just("1B2M2Y8AsgTpgAmY7PhCfg=="), min_size=1, max_size=4),
)
requests = st.builds(
    m.HttpRequest,
    method=st.sampled_from(["GET", "PUT"]),
    url=st.text(max_size=50),
    headers=st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
    expires_at=st.integers(0, 2**40),
)
peer_urls = st.builds(
    lambda host, port, name: f"http://{host}:{port}/{name}",
    st.sampled_from(["127.0.0.1", "peer-1.example", "[::1]"]),
    st.integers(1, 65535),
    st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True),
)
messages = st.one_of(
    st.builds(m.Error, code=st.sampled_from(list(ErrorCode)), message=st.text(max_size=100)),
    st.builds(m.Progress, objects_done=st.integers(0, 10**9), bytes_done=st.integers(0, 10**12)),
    st.builds(
        m.DatasetPullRequest,
        begin_after=st.none() | hashes,
        stop_at=st.none() | hashes,
        force_update_if_diverged=st.booleans(),
        announce=st.none() | peer_urls,
    ),
    st.builds(
        m.DatasetPullResponse,
        head=hashes,
        begin_after=st.none() | hashes,
        transfer_plan=plans,
        max_objects_per_page=st.integers(1, 10**6),
        peers=st.lists(st.builds(m.PeerSource, url=peer_urls, head=hashes), max_size=3),
    ),
    st.builds(m.DatasetPullHeadMoved, head=hashes),
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
                transfer=st.one_of(
                    st.just(m.SkipUpload()),
                    st.builds(m.NotHeld, stored=st.booleans()),
                    st.builds(m.HttpUpload, request=requests),
                    st.builds(
                        m.MultipartUpload,
                        upload_id=st.text(min_size=1, max_size=20),
                        part_size=st.integers(1, 2**33),
                        parts=st.lists(
                            st.builds(m.UploadPart, part_number=st.integers(1, 1024), request=requests), max_size=3
                        ),
                    ),
                ),
            ),
            max_size=3,
        ),
    ),
    st.builds(m.DatasetPushCompleteConfirmed, old_head=st.none() | hashes, new_head=hashes),
    st.just(m.DatasetPullMetadataRequest()),
    st.just(m.DatasetPullComplete()),
    st.just(m.DatasetPullFollow()),
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
        assert exc.code is ErrorCode.BAD_MESSAGE


@pytest.mark.parametrize(
    ("frame", "worded"),
    [
        ('{"type": "DatasetPullRequest", "begin_after": 5}', "invalid message: begin_after: Expected"),
        ('{"type": "Progress", "objects_done": "1", "bytes_done": 0}', "invalid message: objects_done: Expected `int`"),
        ('{"type": "Progress", "objects_done": true, "bytes_done": 0}', "invalid message: objects_done: Expected"),
        ('{"type": "DatasetPullComplete", "extra": 1}', "invalid message: message: Object contains unknown field"),
        ('{"type": "Nope"}', "invalid message: type: Invalid value 'Nope'"),
        ("[1]", "invalid message: message: Expected `object`"),
        ("nul", "message is not valid JSON"),
    ],
)
def test_a_bad_frame_is_refused_with_where_and_what(frame: str, worded: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        codec.decode(frame)
    assert refused.value.code is ErrorCode.BAD_MESSAGE and refused.value.message.startswith(worded)


def test_a_frame_nested_thousands_deep_is_a_bad_message() -> None:
    nested = "[" * 5000 + "]" * 5000
    with pytest.raises(ProtocolError) as refused:
        codec.decode(f'{{"type": "Error", "code": "Busy", "message": "m", "details": {{"a": {nested}}}}}')
    assert refused.value.code is ErrorCode.BAD_MESSAGE


def test_a_refusal_says_where_even_when_the_bad_value_looks_like_a_location() -> None:
    with pytest.raises(ProtocolError) as refused:
        codec.decode(orjson.dumps({"type": "x - at `$.evil\x00\x1b[31m"}).decode())
    assert refused.value.message.startswith("invalid message: type: Invalid value")
    assert r"\x00" in refused.value.message and r"\x1b" in refused.value.message  # escaped, never raw
    assert "\x00" not in refused.value.message and "\x1b" not in refused.value.message


def test_a_refusal_quotes_a_huge_value_shortly() -> None:
    with pytest.raises(ProtocolError) as refused:
        codec.decode(orjson.dumps({"type": "x" * 100_000}).decode())
    assert len(refused.value.message) < 3 * codec.MAX_QUOTED


SAMPLE_HASH = str(Multihash.of(b"sample"))
TARBALL = m.name_of(m.MetadataTarball)
PLAN = m.TransferPlan(num_blocks=1, num_objects=0, bytes_in_objects=0)
#: One valid message of every type the tables name (the binary tarball included).
SAMPLES: dict[str, m.Message | m.MetadataTarball] = {
    "DatasetPullRequest": m.DatasetPullRequest(),
    "DatasetPullResponse": m.DatasetPullResponse(
        head=SAMPLE_HASH, begin_after=None, transfer_plan=PLAN, max_objects_per_page=10
    ),
    "DatasetPullMetadataRequest": m.DatasetPullMetadataRequest(),
    "DatasetPullObjectsTransferRequest": m.DatasetPullObjectsTransferRequest(
        object_files=[m.ObjectFile(kind="data", physical_hash=SAMPLE_HASH, size=1)]
    ),
    "DatasetPullObjectsTransferResponse": m.DatasetPullObjectsTransferResponse(object_transfers=[]),
    "DatasetPullComplete": m.DatasetPullComplete(),
    "DatasetPullFollow": m.DatasetPullFollow(),
    "DatasetPullHeadMoved": m.DatasetPullHeadMoved(head=SAMPLE_HASH),
    "DatasetPushRequest": m.DatasetPushRequest(transfer_plan=PLAN),
    "DatasetPushRequestAccepted": m.DatasetPushRequestAccepted(current_head=None),
    "DatasetPushMetadataAccepted": m.DatasetPushMetadataAccepted(
        num_blocks=1, num_objects=0, max_objects_per_page=1, multipart_threshold=64 << 20, part_size=32 << 20
    ),
    "DatasetPushObjectsTransferRequest": m.DatasetPushObjectsTransferRequest(
        object_files=[m.ObjectFile(kind="data", physical_hash=SAMPLE_HASH, size=1, md5="1B2M2Y8AsgTpgAmY7PhCfg==")]
    ),
    "DatasetPushObjectsTransferResponse": m.DatasetPushObjectsTransferResponse(object_transfers=[]),
    "DatasetPushComplete": m.DatasetPushComplete(),
    "DatasetPushCompleteConfirmed": m.DatasetPushCompleteConfirmed(old_head=None, new_head=SAMPLE_HASH),
    "Progress": m.Progress(objects_done=0, bytes_done=0),
    TARBALL: m.MetadataTarball(b"tarball bytes"),
}
MODELS = {kind: type(sample) for kind, sample in SAMPLES.items()}
ERROR = m.Error(code=ErrorCode.BUSY, message="x")


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000",  # no dataset name
        "http://user:secret@127.0.0.1:9000/ds",  # credentials
        "http://127.0.0.1:9000/ds?x=1",  # query
        "http://127.0.0.1:9000/ds#f",  # fragment
        "file:///etc/passwd",
        "http://127.0.0.1:9000/../ds",
        "http://127.0.0.1:9000/" + "d" * 600,
    ],
)
def test_a_peer_url_that_could_mean_something_else_is_refused(url: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        codec.decode(orjson.dumps({"type": "DatasetPullRequest", "announce": url}).decode())
    assert refused.value.code is ErrorCode.BAD_MESSAGE


def test_every_message_of_the_tables_has_a_sample() -> None:
    assert {m.name_of(kind) for table in FLOWS.values() for (_, _, kind) in table} == set(SAMPLES)
    assert all(m.name_of(kind) == kind.__name__ for kind in MODELS.values())  # the tag is the class name


def test_the_tables_are_the_one_list_of_messages() -> None:
    in_tables = {kind for table in FLOWS.values() for (_, _, kind) in table}
    assert set(MESSAGES) == in_tables | {m.Error}
    assert {kind for flow in FLOWS for kind in messages_of(flow)} == set(MESSAGES)
    json_models = {kind for kind in MESSAGES if issubclass(kind, m.Message)}
    assert set(codec.JSON_MESSAGES) == json_models and m.MetadataTarball not in json_models
    for kind in json_models:  # the codec reads every JSON message of the tables, and only those
        assert any(type(codec.decode(codec.encode(sample))) is kind for sample in [*SAMPLES.values(), ERROR])


def test_a_binary_frame_is_the_tarball_and_a_text_frame_never_is() -> None:
    decoded = codec.decode(b"any bytes")
    assert isinstance(decoded, m.MetadataTarball) and decoded.data == b"any bytes"
    assert codec.encode(decoded) == b"any bytes"
    with pytest.raises(ProtocolError) as refused:
        codec.decode('{"type": "MetadataTarball"}')
    assert refused.value.code is ErrorCode.BAD_MESSAGE


def _frame(kind: str) -> str | bytes:
    sample = SAMPLES[kind]
    return codec.encode(sample)


def _expect_what_the_table_allows(connection: Connection) -> None:
    """Declare every message the peer may send now except keep-alives (what a driver does)."""
    kinds = [
        k
        for k in connection.allowed(connection.peer)
        if FLOWS[connection.flow][(connection.phase, connection.peer, MODELS[k])] is not connection.phase
    ]
    if kinds:
        connection.expect(*(MODELS[k] for k in kinds))


@given(
    st.sampled_from(sorted(FLOWS)),
    st.sampled_from(list(Sender)),
    st.lists(st.sampled_from([*SAMPLES, "Error", "Bogus"]), max_size=30),
)
def test_random_frames_follow_the_table_or_fail_typed(flow: str, side: Sender, kinds: list[str]) -> None:
    connection = Connection(flow, side)
    for kind in kinds:
        if connection.finished:
            break
        before = connection.phase
        allowed = FLOWS[flow].get((before, connection.peer, MODELS[kind])) if kind in MODELS else None
        _expect_what_the_table_allows(connection)
        frame = codec.encode(ERROR) if kind == "Error" else None
        if kind == "Bogus":
            frame = '{"type": "Bogus"}'
        try:
            received = connection.receive(frame if frame is not None else _frame(kind))
        except PeerError as exc:
            assert kind == "Error" and exc.code is ErrorCode.BUSY
            assert connection.phase is Phase.FAILED
            continue
        except ProtocolError as exc:
            assert allowed is None
            if kind == "Bogus":
                assert exc.code is ErrorCode.BAD_MESSAGE
            else:
                assert exc.code is ErrorCode.UNEXPECTED_MESSAGE
                assert before.value in exc.message and kind in exc.message
                assert isinstance(exc.details, UnexpectedMessageDetails) and exc.details.phase == before.value
            assert connection.phase is before  # a refused frame changes nothing
            break
        assert allowed is not None
        assert connection.phase is allowed
        assert (received is None) == (allowed is before)  # keep-alives are absorbed, the rest returned


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


HAPPY = {
    "pull": [
        (Sender.CLIENT, "DatasetPullRequest"),
        (Sender.SERVER, "DatasetPullResponse"),
        (Sender.CLIENT, "DatasetPullMetadataRequest"),
        (Sender.SERVER, TARBALL),
        (Sender.CLIENT, "DatasetPullObjectsTransferRequest"),
        (Sender.SERVER, "DatasetPullObjectsTransferResponse"),
        (Sender.CLIENT, "Progress"),
        (Sender.CLIENT, "DatasetPullComplete"),
    ],
    "push": [
        (Sender.CLIENT, "DatasetPushRequest"),
        (Sender.SERVER, "DatasetPushRequestAccepted"),
        (Sender.CLIENT, TARBALL),
        (Sender.SERVER, "DatasetPushMetadataAccepted"),
        (Sender.CLIENT, "DatasetPushComplete"),
        (Sender.SERVER, "Progress"),
        (Sender.SERVER, "DatasetPushCompleteConfirmed"),
    ],
}


@pytest.mark.parametrize("flow", sorted(HAPPY))
def test_happy_sequences_pass_between_two_connections(flow: str) -> None:
    sides = {Sender.CLIENT: Connection(flow, Sender.CLIENT), Sender.SERVER: Connection(flow, Sender.SERVER)}
    for sender, kind in HAPPY[flow]:
        receiver = sides[Sender.SERVER if sender is Sender.CLIENT else Sender.CLIENT]
        _expect_what_the_table_allows(receiver)
        frame = sides[sender].send(SAMPLES[kind])
        received = receiver.receive(frame)
        assert (received is None) == (kind == "Progress")
    assert all(c.phase is Phase.DONE for c in sides.values())


def test_a_driver_cannot_expect_what_the_table_does_not_allow() -> None:
    connection = Connection("push", Sender.CLIENT)
    connection.send(SAMPLES["DatasetPushRequest"])
    with pytest.raises(ValueError, match="may send"):
        connection.expect(m.DatasetPushCompleteConfirmed)
    connection.expect(m.DatasetPushRequestAccepted)


def test_sending_out_of_order_is_refused_and_changes_nothing() -> None:
    connection = Connection("pull", Sender.CLIENT)
    with pytest.raises(ProtocolError) as caught:
        connection.send(SAMPLES["DatasetPullComplete"])
    assert caught.value.code is ErrorCode.INTERNAL
    assert connection.phase is Phase.AWAIT_REQUEST


def test_fail_sends_a_typed_error_then_a_close_frame_saying_whose_fault() -> None:
    cases = [
        (ErrorCode.BUSY, CLOSE_TRY_AGAIN_LATER),
        (ErrorCode.INTERNAL, CLOSE_INTERNAL_ERROR),
        (ErrorCode.MESSAGE_TOO_LARGE, CLOSE_MESSAGE_TOO_BIG),
        (ErrorCode.UNEXPECTED_MESSAGE, CLOSE_POLICY_VIOLATION),
    ]
    for code, close_code in cases:
        connection = Connection("pull", Sender.SERVER)
        frame, close = connection.fail(ProtocolError(code, "x" * 5000))
        assert frame is not None
        error = codec.decode(frame)
        assert isinstance(error, m.Error) and error.code is code and len(error.message) <= m.MAX_ERROR_TEXT
        assert close.code == close_code and close.reason == code.value
        assert len(close.reason.encode()) <= MAX_CLOSE_REASON_BYTES
        assert connection.fail(ProtocolError(code, "again")) == (None, close)  # said once


def test_a_finished_session_closes_normally_and_the_peer_close_is_understood() -> None:
    client, server = Connection("pull", Sender.CLIENT), Connection("pull", Sender.SERVER)
    client.send(SAMPLES["DatasetPullRequest"])
    said = client.peer_closed(CLOSE_POLICY_VIOLATION, "DatasetNotFound")
    assert said is not None and said.code is ErrorCode.DATASET_NOT_FOUND
    cut = Connection("pull", Sender.CLIENT).peer_closed(1006, None)
    assert cut is not None and cut.code is ErrorCode.UNREACHABLE
    server.phase = Phase.DONE
    assert server.fail(ProtocolError(ErrorCode.INTERNAL, "late")) == (None, server.close_frame())
    assert server.peer_closed(1000, "") is None


@pytest.mark.parametrize("binary", [False, True])
def test_frames_over_the_limit_are_refused_with_the_limit(binary: bool) -> None:
    connection = Connection("push", Sender.SERVER, max_text_bytes=100, max_binary_bytes=100)
    frame: str | bytes = b"x" * 101 if binary else " " * 101
    with pytest.raises(ProtocolError) as caught:
        connection.receive(frame)
    assert caught.value.code is ErrorCode.MESSAGE_TOO_LARGE
    assert caught.value.details == MessageTooLargeDetails(limit=100)


def _tar(entries: list[tuple[str, bytes]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    # mtime=0: gzip would stamp the time into the header, and the test ids (made of these bytes) must be
    # the same in every process that collects them (pytest-xdist workers)
    return gzip.compress(raw.getvalue(), mtime=0)


def _pack_entry(pack: bytes) -> tuple[str, bytes]:
    return "pack-" + str(Multihash.of(pack)), pack


_A = encode_pack([(Multihash.of(b"a"), b"a")])


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"not gzip", "malformed"),
        (gzip.compress(b"not a tar" * 100, mtime=0), "malformed"),
        (_tar([]), "carries no block pack"),
        (_tar([("pack-" + str(Multihash.of(b"a")), _A)]), "pack .* does not match its hash"),
        (_tar([_pack_entry(encode_pack([(Multihash.of(b"a"), b"b")]))]), "block .* does not match its hash"),
        (_tar([_pack_entry(b"NOTPACK\n" + _A[8:])]), "bad magic"),
        (_tar([_pack_entry(_A + b"x")]), "its index describes"),
        (_tar([_pack_entry(_A[:-1])]), "its index describes"),
        (_tar([("000000000-" + str(Multihash.of(b"a")), b"a")]), "out of order"),
        (_tar([("../../etc/passwd", b"a")]), "out of order"),
        (_tar([("manifest-" + str(Multihash.of(b"m")), b"m"), _pack_entry(_A)]), "out of order"),
        (_tar([_pack_entry(_A), _pack_entry(_A)]), "out of order"),
        (_tar([_pack_entry(_A), ("manifest-" + str(Multihash.of(b"m")), b"x")]), "manifest .* does not match its hash"),
        (_tar([_pack_entry(encode_pack([(Multihash.of(b"a" * 70000), b"a" * 70000)]))]), "block limit"),
        (gzip.compress(b"\0" * (2 * 1024 * 1024), mtime=0), "expands beyond"),
    ],
)
def test_hostile_tarballs_are_refused(data: bytes, fragment: str) -> None:
    with pytest.raises(ProtocolError, match=fragment) as caught:
        unpack_blocks(data, max_expanded_bytes=1024 * 1024)
    assert caught.value.code is ErrorCode.INVALID_BLOCKS


def test_a_driver_asks_by_class_whether_it_may_send_a_keep_alive_now() -> None:
    connection = Connection("pull", Sender.CLIENT)
    assert not connection.may_send(m.Progress) and connection.may_send(m.DatasetPullRequest)
    connection.send(SAMPLES["DatasetPullRequest"])
    connection.expect(m.DatasetPullResponse)
    connection.receive(_frame("DatasetPullResponse"))
    connection.send(SAMPLES["DatasetPullMetadataRequest"])
    connection.expect(m.MetadataTarball)
    assert isinstance(connection.receive(_frame(TARBALL)), m.MetadataTarball)  # a message like the others
    assert connection.may_send(m.Progress) and not connection.may_send(m.MetadataTarball)


@pytest.mark.parametrize(
    "announce", ["http://my_host:8000", "http://h\u00e9llo:8000", "http://127.0.0.1:8000/" + "d" * 600]
)
def test_the_client_refuses_to_announce_what_the_server_would_refuse(announce: str) -> None:
    """--announce is checked by PeerUrl's own rule before the pull starts (a usage error, not BadMessage)."""
    from smart_transfer.client.client import Client
    from smart_transfer.errors import InvalidUrl

    with pytest.raises(InvalidUrl):
        Client.check_pull("http://127.0.0.1:9/ds", None, announce, "smart")
    with pytest.raises(ValueError):
        m.check_peer_url(f"{announce}/ds")
    Client.check_pull("http://127.0.0.1:9/ds", None, "http://127.0.0.1:8000", "smart")
