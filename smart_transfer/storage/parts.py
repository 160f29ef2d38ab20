"""How a large object is cut into the parts of a multipart upload: S3's limits and the one layout
rule both sides of a push apply (the client to hash the parts, the server to presign and check them).

Parts are numbered from 1; every part but the last has the same size. S3 refuses parts under 5 MiB
(except the last), parts over 5 GiB and more than 10,000 parts; the embedded store enforces the same.
The layout keeps an object within :data:`MAX_PARTS` parts by growing the part size (in whole MiB),
so that the presigned URLs of one object always fit one negotiation answer.
"""

from __future__ import annotations

from typing import NamedTuple

MIB = 1024 * 1024
#: Smallest part S3 accepts (every part but the last).
MIN_PART_BYTES = 5 * MIB
#: Largest part, and largest single PUT, S3 accepts.
MAX_PART_BYTES = 5 * 1024 * MIB
MAX_SINGLE_PUT_BYTES = MAX_PART_BYTES
#: Largest object S3 stores.
MAX_OBJECT_BYTES = 5 * 1024 * 1024 * MIB
#: Most parts one object is cut into. S3 allows 10,000; 1,024 keep one object's part URLs within one
#: negotiation answer (under 1 MiB), and S3's largest object, 5 TiB, still fits in 1,024 parts of 5 GiB.
MAX_PARTS = 1024
#: Objects larger than this are uploaded in parts (the server's ``--multipart-threshold``).
DEFAULT_MULTIPART_THRESHOLD = 64 * MIB
#: The size of those parts, grown for objects that would need more than MAX_PARTS (``--part-size``).
DEFAULT_PART_SIZE = 32 * MIB


class Part(NamedTuple):
    """One part: its number (from 1), where it starts in the object, and its length."""

    number: int
    offset: int
    length: int


def part_size_for(size: int, preferred: int) -> int:
    """The part size for an object of ``size`` bytes: ``preferred`` unless that makes more than
    MAX_PARTS parts, then the smallest whole number of MiB that does not."""
    if not MIN_PART_BYTES <= preferred <= MAX_PART_BYTES:
        raise ValueError(f"a part size must be {MIN_PART_BYTES}..{MAX_PART_BYTES} bytes, not {preferred}")
    if size > MAX_OBJECT_BYTES:
        raise ValueError(f"an object of {size} bytes exceeds the {MAX_OBJECT_BYTES}-byte limit")
    needed = -(-size // MAX_PARTS)
    return max(preferred, -(-needed // MIB) * MIB)


def layout(size: int, part_size: int) -> list[Part]:
    """The parts of an object of ``size`` bytes cut at ``part_size`` (see :func:`part_size_for`)."""
    if size <= 0 or part_size <= 0:
        raise ValueError("an object cut into parts has at least one byte")
    return [Part(n + 1, offset, min(part_size, size - offset)) for n, offset in enumerate(range(0, size, part_size))]
