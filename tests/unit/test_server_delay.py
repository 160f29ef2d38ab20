"""The server's own delay (server/congestion.py) and how the adaptive limit answers it
(server/adaptive.py): the overload a baseline of durations cannot see, because the server itself is late."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from smart_transfer.server.adaptive import AdaptiveBounds, AdaptiveLimit
from smart_transfer.server.congestion import DELAY_SMOOTHING_SECONDS, DELAY_TICK_SECONDS, ServerDelay


def bounds(delay_target: float) -> AdaptiveBounds:
    return AdaptiveBounds(2, 256, 256, 1.0, 0.2, 4.0, 500, delay_target=delay_target)


def close_windows(limit: AdaptiveLimit, windows: int, in_flight: int, start: float = 0.0) -> float:
    """``windows`` closed windows of usual durations (so only the delay can move the limit down)."""
    now = start
    for _ in range(windows):
        for _ in range(10):
            now += 0.11
            limit.sample("read", 0.05, now, in_flight)
    return now


def test_a_late_server_drops_the_limit_at_once_to_what_was_in_use() -> None:
    late = [0.0]
    limit = AdaptiveLimit(bounds(0.1), lambda: late[0])
    now = close_windows(limit, 3, in_flight=40)
    assert limit.admits == 256  # durations as usual and the server on time: the cap stays
    late[0] = 0.15
    close_windows(limit, 2, in_flight=40, start=now)
    # from the 40 in use, not from the 256 allowed: gradient 0.1 / 0.15
    assert limit.admits == int(40 * 0.1 / 0.15)
    assert limit.last_delay == pytest.approx(0.15)


def test_the_drop_is_at_most_half_per_window_and_never_below_the_minimum() -> None:
    limit = AdaptiveLimit(bounds(0.1), lambda: 5.0)
    now = 0.0
    while limit.admits == 256:  # until the first window closes
        now += 0.11
        limit.sample("read", 0.05, now, 40)
    assert limit.admits == 20  # fifty times late: halved (from the 40 in use), no more
    for _ in range(10):  # the holders shrink with the limit: each drop takes effect
        now = close_windows(limit, 1, in_flight=limit.admits, start=now)
    assert limit.admits == 2


def test_a_server_on_time_lets_the_limit_grow_back() -> None:
    late = [1.0]
    limit = AdaptiveLimit(bounds(0.1), lambda: late[0])
    now = close_windows(limit, 4, in_flight=64)
    low = limit.admits
    assert low < 64
    late[0] = 0.01
    close_windows(limit, 20, in_flight=256, start=now)
    assert limit.admits > low


def test_target_zero_ignores_the_delay() -> None:
    limit = AdaptiveLimit(bounds(0.0), lambda: 10.0)
    close_windows(limit, 5, in_flight=256)
    assert limit.admits == 256
    assert limit.last_delay == 0.0


def test_the_delay_averages_the_loop_lag_and_the_queue_wait_exponentially() -> None:
    waited = [0.0]
    delay = ServerDelay(lambda: waited[0])
    delay.record(late=2.0, elapsed=DELAY_SMOOTHING_SECONDS)  # work arriving meanwhile waited 1 s on average
    assert delay() == pytest.approx(1 - math.exp(-1))
    waited[0] = 3.0  # the worker queue waits longer than the loop is late: the larger counts
    before = delay()
    delay.record(late=0.0, elapsed=DELAY_SMOOTHING_SECONDS)
    assert delay() == pytest.approx(before + (1 - math.exp(-1)) * (3.0 - before))
    waited[0] = 0.0
    for _ in range(200):  # on time again: it decays to nothing
        delay.record(late=0.0, elapsed=DELAY_TICK_SECONDS)
    assert delay() < 0.01


def test_a_blocked_event_loop_shows_as_delay() -> None:
    async def scenario() -> tuple[float, float]:
        delay = ServerDelay(lambda: 0.0)
        watching = asyncio.create_task(delay.watch())
        await asyncio.sleep(DELAY_TICK_SECONDS * 4)
        quiet = delay()
        for _ in range(5):
            time.sleep(0.2)  # a callback that holds the loop, as an overloaded server's do
            await asyncio.sleep(0)
        await asyncio.sleep(DELAY_TICK_SECONDS * 2)
        watching.cancel()
        return quiet, delay()

    quiet, blocked = asyncio.run(scenario())
    assert blocked > quiet
    assert blocked > 0.1


def test_a_drop_waits_for_the_last_to_take_effect_and_an_unused_limit_does_not_drop() -> None:
    limit = AdaptiveLimit(bounds(0.1), lambda: 5.0)
    now = 0.0
    while limit.admits == 256:
        now += 0.11
        limit.sample("read", 0.05, now, 40)
    assert limit.admits == 20
    close_windows(limit, 5, in_flight=40, start=now)  # 40 still run, above the 20: the drop has not bitten
    assert limit.admits == 20
    idle = AdaptiveLimit(bounds(0.1), lambda: 5.0)
    close_windows(idle, 5, in_flight=0)  # the server is late, but none of this limit's holders ran
    assert idle.admits == 256
