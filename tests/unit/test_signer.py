"""The one signer never hands out a PUT for an object the dataset holds committed: not at its size,
and not at another size either (a key names no size, so such a PUT would overwrite the committed bytes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smart_transfer.model import AddData, DataSlice, Multihash, ObjectKind, ObjectRef, OffsetInterval
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.repo import Repository
from smart_transfer.server.metrics import Metrics
from smart_transfer.server.signer import Signer
from smart_transfer.storage.local import LocalStore


@pytest.mark.parametrize("size_asked", [0, 5, 64, 65, 10**9])
def test_no_put_url_for_a_committed_object_at_any_size(tmp_path: Path, size_asked: int) -> None:
    repository = Repository(LocalStore(tmp_path / "store"), tmp_path / "index")
    try:
        dataset = repository.dataset("sales")
        data = os.urandom(64)
        digest = Multihash.of(data)
        committed = ObjectRef(ObjectKind.DATA, digest, len(data))
        repository.store.put(dataset.object_key(committed), data)
        dataset.append([AddData(new_data=DataSlice(digest, len(data), OffsetInterval(0, 0), 1))])
        signer = Signer(Metrics())
        asked = ObjectRef(ObjectKind.DATA, digest, size_asked)
        with pytest.raises(ProtocolError) as refused:
            signer.put(dataset, asked, 60, None)
        assert refused.value.code is ErrorCode.OBJECT_NOT_ALLOWED and "never written again" in str(refused.value)
        with pytest.raises(ProtocolError):
            signer.put_part(dataset, asked, ("upload", 1), "bWQ1", 60)
        assert repository.store.get(dataset.object_key(committed)) == data
    finally:
        repository.close()
