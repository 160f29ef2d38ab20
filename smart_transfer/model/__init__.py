"""The dataset model: multihashes, canonical block encoding, events and chain rules (pure, no I/O)."""

from smart_transfer.model.block import MetadataBlock, NewBlock, decode_block
from smart_transfer.model.chain import ChainTip, validate_chain, validate_extension
from smart_transfer.model.errors import (
    ChainRuleViolation,
    InvalidBlock,
    InvalidDatasetName,
    InvalidMultihash,
    ModelError,
)
from smart_transfer.model.events import (
    AddData,
    Checkpoint,
    DataField,
    DataSlice,
    Event,
    OffsetInterval,
    Seed,
    SetDataSchema,
    SetInfo,
)
from smart_transfer.model.multihash import SHA2_256, SHA3_256, Multihash
from smart_transfer.model.names import DatasetName
from smart_transfer.model.objects import ObjectKind, ObjectRef, checkpoint_refs, committed_refs, objects_of

__all__ = [
    "SHA2_256",
    "SHA3_256",
    "AddData",
    "ChainRuleViolation",
    "ChainTip",
    "Checkpoint",
    "DataField",
    "DataSlice",
    "DatasetName",
    "Event",
    "InvalidBlock",
    "InvalidDatasetName",
    "InvalidMultihash",
    "MetadataBlock",
    "ModelError",
    "Multihash",
    "NewBlock",
    "ObjectKind",
    "ObjectRef",
    "OffsetInterval",
    "Seed",
    "SetDataSchema",
    "SetInfo",
    "checkpoint_refs",
    "committed_refs",
    "decode_block",
    "objects_of",
    "validate_chain",
    "validate_extension",
]
