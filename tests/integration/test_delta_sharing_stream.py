"""Delta Sharing answers stream, and file statistics outlive the server: a table of more files than one
streamed chunk holds (server/delta_sharing/stream.py) answers its first lines before its last chunk is
made, a failure after them cuts the answer short (the unmodified client fails, never reads a short
answer as whole), and the statistics read from footers are kept in the index across a restart."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests
from delta_sharing.protocol import DeltaSharingProfile, Table
from delta_sharing.rest_client import DataSharingRestClient

from smart_transfer.model import AddData, DatasetName, DataSlice, Multihash, ObjectKind
from smart_transfer.model.events import OffsetInterval
from smart_transfer.repo import Workspace
from smart_transfer.repo.layout import object_key
from smart_transfer.server.delta_sharing.stream import FILES_PER_CHUNK
from smart_transfer.storage.local import LocalStore
from tests.conftest import ServerProcess, run_cli, start_server, summary

#: Files of each table: one chunk's worth of one slice, then one more slice in the next chunk.
FILES = FILES_PER_CHUNK + 1
ROWS = 4
NAME = "long"


def _slice(start: int) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"offset": pa.array(range(start, start + ROWS), pa.int64())}), sink)
    return bytes(sink.getvalue())


def _build(workspace: Path) -> Multihash:
    """``NAME``: FILES - 1 blocks adding one slice (the same object), then a block adding another, which
    only the answer's second chunk needs; the other's hash."""
    first, last = _slice(0), _slice((FILES - 1) * ROWS)
    with Workspace(workspace) as opened:
        for data in (first, last):
            opened.local_store.put(object_key(DatasetName(NAME), ObjectKind.DATA, Multihash.of(data)), data)
        events = []
        for index, data in enumerate([first] * (FILES - 1) + [last]):
            interval = OffsetInterval(index * ROWS, index * ROWS + ROWS - 1)
            events.append(AddData(new_data=DataSlice(Multihash.of(data), len(data), interval, ROWS)))
        opened.dataset(NAME).append(events)
    return Multihash.of(last)


class Shared:
    """A server holding ``NAME``, and the last slice's object (``late``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = start_server(root / "server")
        self.late = _build(root / "ws")
        summary(run_cli("push", NAME, f"{self.server.url}/{NAME}", "--json", workspace=root / "ws"))
        self.store = LocalStore(root / "server" / "store")
        self.late_key = object_key(DatasetName(NAME), ObjectKind.DATA, self.late)

    def restart(self) -> None:
        self.server.stop()
        self.server = start_server(self.root / "server")

    @property
    def query_url(self) -> str:
        return f"{self.server.url}/delta-sharing/shares/smart-transfer/schemas/datasets/tables/{NAME}/query"


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    box = Shared(tmp_path_factory.mktemp("sharing-stream"))
    yield box
    box.server.stop()


def _footer_reads(server: ServerProcess) -> int:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
        text = response.read().decode()
    found = re.search(r"^smart_transfer_sharing_footer_reads_total (\S+)$", text, re.M)
    assert found is not None, "no footer-read counter"
    return int(float(found.group(1)))


def _stats(url: str) -> list[str]:
    answer = httpx.post(url, json={}, timeout=60)
    assert answer.status_code == 200, answer.text
    lines = [orjson.loads(line) for line in answer.text.splitlines()]
    return [line["file"]["stats"] for line in lines if "file" in line]


def test_the_answer_streams_and_a_late_failure_cuts_it_short(shared: Shared) -> None:
    # the last slice's object disappears behind the server's back before its footer was ever read; only
    # the answer's second chunk needs it (put back afterwards: the next test reads it)
    data = shared.store.get(shared.late_key)
    shared.store.delete(shared.late_key)
    try:
        seen: list[dict[str, object]] = []
        with httpx.stream("POST", shared.query_url, json={}, timeout=60) as answer:
            assert answer.status_code == 200 and answer.headers.get("transfer-encoding") == "chunked"
            with pytest.raises(httpx.RemoteProtocolError):
                for line in answer.iter_lines():
                    seen.append(orjson.loads(line))
        assert list(seen[0]) == ["protocol"] and list(seen[1]) == ["metaData"]
        assert len([line for line in seen if "file" in line]) == FILES_PER_CHUNK  # the first chunk, no more
        profile = DeltaSharingProfile(1, f"{shared.server.url}/delta-sharing", "anonymous")
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            DataSharingRestClient(profile, num_retries=0).list_files_in_table(Table(NAME, "smart-transfer", "datasets"))
        # what does not need the lost slice still answers whole
        assert httpx.post(shared.query_url, json={"limitHint": 1}, timeout=60).text.count('"file"') == 1
    finally:
        shared.store.put(shared.late_key, data)


def test_statistics_are_read_once_and_survive_a_restart(shared: Shared) -> None:
    stats = _stats(shared.query_url)
    assert len(stats) == FILES and '"minValues":{"offset":0}' in stats[0]
    assert f'"minValues":{{"offset":{(FILES - 1) * ROWS}}}' in stats[-1]
    reads = _footer_reads(shared.server)
    assert 1 <= reads <= 2  # one per distinct slice not read before (by the test above, if it ran)
    assert _stats(shared.query_url) == stats and _footer_reads(shared.server) == reads
    shared.restart()
    assert _stats(shared.query_url) == stats
    assert _footer_reads(shared.server) == 0  # from the index, not the footers
