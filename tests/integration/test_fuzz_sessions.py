"""Fuzzing live sessions: random sequences of frames (valid messages of any type and phase, random
text, random bytes, real tarballs) against a real server. Every answer is a valid message of the
protocol or a typed Error followed by a close frame; the server survives all of it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from smart_transfer.model import Multihash
from smart_transfer.protocol import SUBPROTOCOL, codec
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.messages import Error
from smart_transfer.protocol.tarball import pack_blocks
from tests.conftest import ServerProcess, make_files, run_cli
from tests.unit.test_protocol import messages

#: Examples per run (each is one session of up to 5 frames).
FUZZ_EXAMPLES = 200
frames = st.one_of(
    messages.map(codec.encode),
    st.text(max_size=200),
    st.binary(max_size=200),
    st.lists(st.binary(max_size=50), max_size=3).map(lambda bs: pack_blocks([(Multihash.of(b), b) for b in bs])),
    st.sampled_from(
        [
            '{"type": "DatasetPullRequest"}',
            '{"type": "DatasetPullMetadataRequest"}',
            '{"type": "DatasetPullComplete"}',
            '{"type": "DatasetPushComplete"}',
        ]
    ),
)


@pytest.fixture(scope="module")
def fuzz_target(local_server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("fuzz")
    run_cli("add", "fuzz", *map(str, make_files(tmp / "in", 2, 100)), workspace=tmp / "ws")
    assert run_cli("push", "fuzz", f"{local_server.url}/fuzz", workspace=tmp / "ws").returncode == 0
    yield local_server.url.replace("http://", "ws://")


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flow=st.sampled_from(["pull", "push"]), sequence=st.lists(frames, min_size=1, max_size=5))
def test_random_frame_sequences_get_valid_answers_or_typed_errors(
    fuzz_target: str, local_server: ServerProcess, flow: str, sequence: list[str | bytes]
) -> None:
    with connect(f"{fuzz_target}/fuzz/{flow}", subprotocols=[SUBPROTOCOL]) as connection:  # type: ignore[list-item]
        errored = False
        for frame in sequence:
            try:
                connection.send(frame)
                while True:
                    answer = connection.recv(timeout=0.2)
                    if isinstance(answer, bytes):
                        assert flow == "pull"  # only a pull server sends a tarball
                        continue
                    try:
                        message = codec.decode(answer)
                    except ProtocolError as exc:
                        pytest.fail(f"the server sent an invalid message: {exc}")
                    if isinstance(message, Error):
                        errored = True
            except TimeoutError:
                continue
            except ConnectionClosed:
                break
        if errored:
            with pytest.raises(ConnectionClosed):
                connection.recv(timeout=5)
            assert connection.close_code in (1008, 1011)
            assert len((connection.close_reason or "").encode()) <= 123
    assert httpx.get(local_server.url + "/", timeout=10).status_code == 200


def test_the_server_is_still_whole_after_the_fuzzing(local_server: ServerProcess, tmp_path: Path) -> None:
    pulled = run_cli("pull", f"{local_server.url}/fuzz", workspace=tmp_path / "check")
    assert pulled.returncode == 0, pulled.stderr
    assert run_cli("verify", "fuzz", f"{local_server.url}/fuzz", workspace=tmp_path / "check").returncode == 0
