"""Where each part of a dataset lives in a store: ``{dataset}/refs/head``, ``{dataset}/packs/{hash}``
(block packs, one per commit), ``{dataset}/data/{hash}``, ``{dataset}/checkpoints/{hash}``; and, in
repositories written before packs (or blocks uploaded one by one over REST), ``{dataset}/blocks/{hash}``.

Every store key the project writes or parses is built here; nothing else spells a key."""

from __future__ import annotations

from smart_transfer.model import DatasetName, ModelError, Multihash, ObjectKind

__all__ = [
    "ObjectKind",
    "block_key",
    "block_prefix",
    "dataset_prefix",
    "hash_of_key",
    "head_key",
    "object_key",
    "object_prefix",
    "pack_key",
    "pack_prefix",
]


def dataset_prefix(dataset: DatasetName) -> str:
    """The prefix of every key of ``dataset``."""
    return f"{dataset}/"


def head_key(dataset: DatasetName) -> str:
    """The ref naming the dataset's head block."""
    return f"{dataset}/refs/head"


def block_key(dataset: DatasetName, block_hash: Multihash) -> str:
    """A block stored on its own (see the module docstring)."""
    return f"{dataset}/blocks/{block_hash}"


def block_prefix(dataset: DatasetName) -> str:
    """The prefix of the dataset's single-block objects."""
    return f"{dataset}/blocks/"


def pack_key(dataset: DatasetName, pack_hash: Multihash) -> str:
    """A block pack, named by the hash of its bytes."""
    return f"{dataset}/packs/{pack_hash}"


def pack_prefix(dataset: DatasetName) -> str:
    """The prefix of the dataset's block packs."""
    return f"{dataset}/packs/"


def object_key(dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> str:
    """A data slice or checkpoint object, named by the hash of its bytes."""
    return f"{dataset}/{kind.value}/{object_hash}"


def object_prefix(dataset: DatasetName, kind: ObjectKind) -> str:
    """The prefix of the dataset's objects of ``kind``."""
    return f"{dataset}/{kind.value}/"


def hash_of_key(key: str) -> Multihash | None:
    """The hash a content-addressed key (block, pack or object) ends with; None when it names none."""
    try:
        return Multihash.parse(key.rpartition("/")[2])
    except ModelError:
        return None
