"""The local chain a pull or a push offers the server: the tip, the blocks the local side knows (so the
server finds the last common block), and how to ask whether a block is on the local chain."""

from __future__ import annotations

from smart_transfer.client.transports.base import LocalChain
from smart_transfer.model import ChainTip
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.sync.attach import known_blocks


def local_chain(dataset: DatasetRepository, tip: ChainTip | None) -> LocalChain:
    """What ``dataset`` at ``tip`` offers: the tip, its known blocks, a test of membership, and the
    manifest pages it holds."""
    return LocalChain(tip, known_blocks(dataset, tip), dataset.on_chain, dataset.page_source)
