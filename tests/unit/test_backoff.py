"""The one backoff rule: doubling from the base, capped, with 0.5x-1.5x jitter."""

from __future__ import annotations

import pytest

from smart_transfer.transfer.backoff import JITTER_HIGH, JITTER_LOW, backoff_delay, longest_backoff


@pytest.mark.parametrize(("attempt", "doubled"), [(1, 0.25), (2, 0.5), (3, 1.0), (6, 8.0), (7, 10.0), (30, 10.0)])
def test_delay_doubles_up_to_the_cap_with_bounded_jitter(attempt: int, doubled: float) -> None:
    delays = [backoff_delay(attempt, 0.25, 10.0) for _ in range(200)]
    assert all(doubled * JITTER_LOW <= d <= doubled * JITTER_HIGH for d in delays)
    assert len(set(delays)) > 1  # jittered, not a fixed wait
    assert longest_backoff(attempt, 0.25, 10.0) == doubled * JITTER_HIGH


def test_attempts_are_numbered_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        backoff_delay(0, 1.0)
