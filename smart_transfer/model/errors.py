"""Typed errors of the dataset model. Each says what was wrong and, for chains, where."""

from __future__ import annotations


class ModelError(ValueError):
    """Base of every model error: the input broke a rule of the dataset model."""


class InvalidMultihash(ModelError):
    """Text or bytes that are not a supported multihash."""


class InvalidDatasetName(ModelError):
    """A dataset name that is not allowed (it could escape a prefix, or is malformed)."""


class InvalidBlock(ModelError):
    """Bytes that do not decode to a well-formed metadata block."""


class ChainRuleViolation(ModelError):
    """A block that breaks a chain rule; names the block, its sequence number and the rule."""

    def __init__(self, rule: str, message: str, *, sequence_number: int, block_hash: str) -> None:
        self.rule = rule
        self.sequence_number = sequence_number
        self.block_hash = block_hash
        super().__init__(f"block {sequence_number} ({block_hash}) breaks rule '{rule}': {message}")
