"""Where each part of a dataset lives in a store: ``{dataset}/refs/head``, ``{dataset}/packs/{hash}``
(block packs, one per commit), ``{dataset}/data/{hash}``, ``{dataset}/checkpoints/{hash}``; and, in
repositories written before packs (or blocks uploaded one by one over REST), ``{dataset}/blocks/{hash}``."""

from __future__ import annotations

from smart_transfer.model import DatasetName, Multihash, ObjectKind

__all__ = [
    "ObjectKind",
    "block_key",
    "block_prefix",
    "head_key",
    "object_key",
    "object_prefix",
    "pack_key",
    "pack_prefix",
]


def head_key(dataset: DatasetName) -> str:
    return f"{dataset}/refs/head"


def block_key(dataset: DatasetName, block_hash: Multihash) -> str:
    return f"{dataset}/blocks/{block_hash}"


def block_prefix(dataset: DatasetName) -> str:
    return f"{dataset}/blocks/"


def pack_key(dataset: DatasetName, pack_hash: Multihash) -> str:
    return f"{dataset}/packs/{pack_hash}"


def pack_prefix(dataset: DatasetName) -> str:
    return f"{dataset}/packs/"


def object_key(dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> str:
    return f"{dataset}/{kind.value}/{object_hash}"


def object_prefix(dataset: DatasetName, kind: ObjectKind) -> str:
    return f"{dataset}/{kind.value}/"
