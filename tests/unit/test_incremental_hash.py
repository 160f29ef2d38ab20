"""Hashing while bytes arrive: a streamed body is written and hashed in order by its own thread (and a
write that fails, or a body of the wrong length, is caught); a ranged download's hash follows the
completed prefix of its file, so ranges that land out of order wait, a damaged range changes the
digest and a file shorter than its ranges fails."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
from pathlib import Path

import pytest

from smart_transfer.model import Multihash
from smart_transfer.model.multihash import SHA2_256
from smart_transfer.storage.parts import layout
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.http import _VerifyingSink
from smart_transfer.transfer.pieces import run_pieces
from smart_transfer.transfer.ranges import PrefixHasher
from smart_transfer.transfer.writer import BackgroundWriter

#: Every wait here is bounded: a hang fails the test instead of stalling the suite.
BOUND_SECONDS = 10.0

CHUNKS = [os.urandom(size) for size in (70_000, 1, 4096, 300_000, 5)]
BODY = b"".join(CHUNKS)


def test_the_writer_keeps_the_order_within_its_bound() -> None:
    out, hasher = io.BytesIO(), hashlib.sha256()
    writer = BackgroundWriter(out, hasher, bound=100_000)  # smaller than the body: put() waits for it
    writer.put(CHUNKS[:2])  # a list of chunks at a time, as the transports hand them over
    for chunk in CHUNKS[2:]:
        writer.put([chunk])
    writer.finish()
    assert out.getvalue() == BODY
    assert hasher.digest() == hashlib.sha256(BODY).digest()


class _FullDisk(io.BytesIO):
    def write(self, data: object) -> int:
        raise OSError(28, "No space left on device")


def test_a_failed_write_reaches_the_loop() -> None:
    writer = BackgroundWriter(_FullDisk(), hashlib.sha256(), bound=1)
    writer.put([b"x" * 4096])
    with pytest.raises(OSError, match="No space left"):
        writer.put([b"y" * 4096])  # waits for the first chunk, which failed
    with pytest.raises(OSError, match="No space left"):
        writer.finish()


async def _sink_check(tmp_path: Path, chunks: list[bytes], expected: bytes) -> None:
    with open(tmp_path / "body", "wb") as out:
        sink = _VerifyingSink("obj", Multihash.of(expected, SHA2_256), len(expected), out)
        try:
            for chunk in chunks:
                sink.write([chunk])
            await asyncio.wait_for(sink.check(), BOUND_SECONDS)
        finally:
            sink.writer.abandon()


def test_a_streamed_body_is_verified_with_its_last_byte(tmp_path: Path) -> None:
    asyncio.run(_sink_check(tmp_path, CHUNKS, BODY))
    assert (tmp_path / "body").read_bytes() == BODY


@pytest.mark.parametrize(
    ("chunks", "problem"),
    [
        (CHUNKS[:-1], f"{len(BODY) - 5} bytes, expected {len(BODY)}"),  # a short body
        ([*CHUNKS[:-1], b"ZZZZZ"], "content does not match its hash"),  # a damaged one
        ([*CHUNKS, b"!"], f"larger than the {len(BODY)} bytes"),  # a long one, refused as it arrives
    ],
)
def test_a_wrong_streamed_body_is_refused(tmp_path: Path, chunks: list[bytes], problem: str) -> None:
    with pytest.raises(TransferFailed, match=problem):
        asyncio.run(_sink_check(tmp_path, chunks, BODY))


async def _prefix_digest(path: Path, size: int, order: list[int]) -> Multihash:
    """The digest of ``path`` (ranges of 4,096 bytes) with the ranges marked done in ``order``."""
    ranges = layout(size, 4096)
    hasher = PrefixHasher(path, ranges, SHA2_256)
    digest = asyncio.create_task(hasher.digest())
    for number in order:
        await asyncio.sleep(0)  # the hasher runs between ranges landing
        assert not digest.done()  # not before the first range, whatever else landed
        hasher.ready(number)
    return await asyncio.wait_for(digest, BOUND_SECONDS)


def test_ranges_landing_out_of_order_are_hashed_in_order(tmp_path: Path) -> None:
    data = os.urandom(4 * 4096 + 100)
    (tmp_path / "staging").write_bytes(data)
    digest = asyncio.run(_prefix_digest(tmp_path / "staging", len(data), [5, 3, 2, 4, 1]))
    assert digest == Multihash.of(data, SHA2_256)


def test_a_damaged_range_changes_the_digest(tmp_path: Path) -> None:
    data = bytearray(os.urandom(3 * 4096))
    expected = Multihash.of(bytes(data), SHA2_256)
    data[5000] ^= 1  # one bit of range 2
    (tmp_path / "staging").write_bytes(data)
    assert asyncio.run(_prefix_digest(tmp_path / "staging", len(data), [3, 1, 2])) != expected


def test_a_staging_file_shorter_than_its_ranges_fails(tmp_path: Path) -> None:
    (tmp_path / "staging").write_bytes(os.urandom(2 * 4096))
    with pytest.raises(TransferFailed, match="shorter than its ranges"):
        asyncio.run(_prefix_digest(tmp_path / "staging", 3 * 4096, [1, 2, 3]))


def test_ranged_objects_holding_every_slot_still_finish() -> None:
    """64 ranged objects on 16 slots: each holds one, and its other workers find none free. Its first
    worker fetches every range; the others stop waiting once no range is left (they waited forever)."""
    fetched: list[int] = []

    async def fetch(piece: int) -> None:
        await asyncio.sleep(0)
        fetched.append(piece)

    async def main() -> None:
        slots = asyncio.Semaphore(16)

        async def one_object() -> None:
            async with slots:
                await run_pieces([1, 2], fetch, 8, slots)

        await asyncio.wait_for(asyncio.gather(*(one_object() for _ in range(64))), BOUND_SECONDS)
        assert slots._value == 16  # every slot given back

    asyncio.run(main())
    assert sorted(fetched) == [1] * 64 + [2] * 64


def test_the_writer_writes_a_real_file_with_one_vectored_write_per_put(tmp_path: Path) -> None:
    path, hasher = tmp_path / "body", hashlib.sha256()
    with open(path, "wb") as out:
        writer = BackgroundWriter(out, hasher, bound=100_000)
        writer.put(CHUNKS[:3])
        writer.put(CHUNKS[3:])
        writer.finish()
    assert path.read_bytes() == BODY and hasher.digest() == hashlib.sha256(BODY).digest()
