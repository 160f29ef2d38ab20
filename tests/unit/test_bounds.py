"""The pure parts of the bounds: how long a transfer attempt may last, when a stalled store is
reported, what a pushed tarball may expand to, and the error log's rate limit."""

from __future__ import annotations

import logging

import pytest

from smart_transfer.model import Multihash
from smart_transfer.model.block import MAX_BLOCK_BYTES
from smart_transfer.protocol.tarball import DEFAULT_MAX_EXPANDED_BYTES, expanded_bound, pack_blocks, unpack_blocks
from smart_transfer.server.logs import RateLimit
from smart_transfer.transfer.limits import Timeouts


def test_an_attempt_lasts_the_two_timeouts_plus_the_size_at_the_minimum_rate() -> None:
    timeouts = Timeouts(connect=5, read=10, attempts=3, min_rate=1000)
    assert timeouts.object_seconds(0) == 15
    assert timeouts.object_seconds(50_000) == 65
    assert timeouts.limited(None, 16) is timeouts
    assert timeouts.limited(8000, 16).min_rate == 500  # a shared bandwidth limit slows every transfer
    assert timeouts.limited(10**9, 16).min_rate == 1000


def test_a_stalled_store_is_reported_well_under_a_minute_by_default() -> None:
    bound = Timeouts().stall_bound()
    assert 30 < bound < 50
    assert Timeouts(read=1, connect=1, attempts=1).stall_bound() == 2


@pytest.mark.parametrize("values", [{"read": 0}, {"connect": -1}, {"attempts": 0}, {"min_rate": 0}])
def test_bounds_must_be_positive(values: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Timeouts(**values)  # type: ignore[arg-type]


def test_a_pushed_tarball_may_expand_to_what_its_plan_declares() -> None:
    blocks = [(Multihash.of(data), data) for data in (b"x" * MAX_BLOCK_BYTES, b"y" * 1000, b"z")]
    packed = pack_blocks(blocks)
    assert len(unpack_blocks(packed, max_expanded_bytes=expanded_bound(3, 0, 0)).blocks) == 3
    assert expanded_bound(10**9, 0, 0) == DEFAULT_MAX_EXPANDED_BYTES
    assert expanded_bound(1, 1, 10**9) < expanded_bound(1, 1, 0) + 2 * 1024 * 1024  # manifests are capped


def test_the_error_log_rate_limit_drops_floods_and_says_so() -> None:
    limit = RateLimit(per_second=1)  # bursts of 10
    records = [logging.LogRecord("x", logging.WARNING, "", 0, f"line {i}", None, None) for i in range(30)]
    passed = [record for record in records if limit.filter(record)]
    assert len(passed) == 10
    limit.tokens = 1  # a second later
    last = logging.LogRecord("x", logging.WARNING, "", 0, "after", None, None)
    assert limit.filter(last) and "20 earlier line(s) dropped" in last.getMessage()
