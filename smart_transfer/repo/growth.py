"""How a dataset grew: the records and data bytes it held at versions of its chain, sampled to a bounded
number of points, in one scan of the index. The figures are the comparison's (repo/compare.py): at block
``k``, the records are the index's next offset (what ``diff 0 k`` counts as ``records``, block 0 holding
none) and the data bytes are the sizes of the slices blocks 1 to ``k`` added (``diff 0 k``'s
``data_bytes``)."""

from __future__ import annotations

from dataclasses import dataclass

from smart_transfer.model import AddData, ChainTip, decode_block
from smart_transfer.model.fastblock import slice_size
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.repo.slices import NEW_DATA

#: Most points a growth curve holds, whatever the chain's length.
GROWTH_POINTS = 200


@dataclass(frozen=True)
class GrowthPoint:
    """The dataset at one block: its sequence number, time, records and data bytes."""

    sequence_number: int
    system_time: str
    records: int
    data_bytes: int


def sampled(last: int, most: int) -> list[int]:
    """At most ``most`` (at least 2) sequence numbers from 0 to ``last``, evenly spread, both ends kept."""
    if last + 1 <= most:
        return list(range(last + 1))
    step = last / (most - 1)
    return sorted({round(i * step) for i in range(most)})


def _slice_bytes(body: bytes) -> int:
    """The size of the data slice a block adds (0 for any other block; bytes not naming one are not decoded,
    nor canonical ones, whose size a pattern reads)."""
    if NEW_DATA not in body:
        return 0
    size = slice_size(body)
    if size is not None:
        return size
    event = decode_block(body).event
    return event.new_data.size if isinstance(event, AddData) and event.new_data is not None else 0


def growth(repo: DatasetRepository, tip: ChainTip, most: int = GROWTH_POINTS) -> list[GrowthPoint]:
    """The dataset's records and data bytes at up to ``most`` blocks of the chain ending at ``tip``
    (block 0 and the head among them), oldest first."""
    wanted = sampled(tip.sequence_number, most)
    points: list[GrowthPoint] = []
    data_bytes = 0
    position = 0
    for seq, (_, body) in enumerate(repo.chain_hash_texts(0, tip.sequence_number)):
        if seq > 0:  # block 0 is the base every figure is counted from (diff 0 k)
            data_bytes += _slice_bytes(body)
        if seq != wanted[position]:
            continue
        entry = repo.required_entry(seq)
        points.append(GrowthPoint(seq, decode_block(body).system_time, entry[1], data_bytes))
        position += 1
        if position == len(wanted):
            break
    return points
