"""The growth chart's sampling (repo/growth.py): at most the bound, evenly spread, both ends kept."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from smart_transfer.repo.growth import GROWTH_POINTS, sampled


@given(st.integers(0, 10**7), st.integers(2, 500))
def test_samples_are_bounded_ordered_and_keep_both_ends(last: int, most: int) -> None:
    points = sampled(last, most)
    assert points[0] == 0 and points[-1] == last
    assert points == sorted(set(points)) and len(points) <= most
    assert len(points) == min(last + 1, most)  # no point lost to rounding
    assert all(0 <= seq <= last for seq in points)


def test_a_chain_of_100000_blocks_gives_the_bound() -> None:
    points = sampled(99_999, GROWTH_POINTS)
    assert len(points) == GROWTH_POINTS and max(b - a for a, b in itertools.pairwise(points)) <= 503
