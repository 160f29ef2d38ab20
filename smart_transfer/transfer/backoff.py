"""Backoff with jitter: how long to wait before trying again, for every retry loop of the project.

The wait doubles with each failed attempt from ``base`` up to ``cap``, and is multiplied by a random
factor between ``JITTER_LOW`` and ``JITTER_HIGH`` so that clients that failed together (a server
that answered Busy to many, a store that dropped every connection) do not all come back together.
"""

from __future__ import annotations

import math
import random

#: Smallest factor applied to the doubled delay.
JITTER_LOW = 0.5
#: Largest factor applied to the doubled delay.
JITTER_HIGH = 1.5


def _doubled(attempt: int, base: float, cap: float) -> float:
    if attempt < 1:
        raise ValueError("attempts are numbered from 1")
    return min(cap, base * 2.0 ** (attempt - 1))


def backoff_delay(attempt: int, base: float, cap: float = math.inf) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1 for the first): ``base`` doubled per
    attempt, at most ``cap``, times a random factor in [JITTER_LOW, JITTER_HIGH]."""
    return _doubled(attempt, base, cap) * random.uniform(JITTER_LOW, JITTER_HIGH)


def longest_backoff(attempt: int, base: float, cap: float = math.inf) -> float:
    """The longest :func:`backoff_delay` can return for these arguments (for documented bounds)."""
    return _doubled(attempt, base, cap) * JITTER_HIGH
