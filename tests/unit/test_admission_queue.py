"""The admission queue of a concurrency limit (server/limits.py): a newcomer held back by the adaptive
limit alone waits, in order of arrival, up to --admission-queue-wait for a freed slot, and is refused Busy
when none comes; at the cap, or at its subject's own limit, it is refused at once. Real asyncio, with
short waits; no speed is asserted."""

from __future__ import annotations

import asyncio

import pytest

from smart_transfer.server.adaptive import AdaptiveBounds, AdaptiveLimit
from smart_transfer.server.limits import Busy, ConcurrencyLimit


def limited(admits: int, cap: int = 8, per_subject: int = 8, queue_wait: float = 5.0) -> ConcurrencyLimit:
    """A limit whose adaptive part admits ``admits`` under ``cap`` (no sample moves it in these tests)."""
    adaptive = AdaptiveLimit(AdaptiveBounds(1, cap, admits, 60.0, 0.2, 4.0, 500))
    return ConcurrencyLimit("sessions", cap, per_subject, retry_after=2, adaptive=adaptive, queue_wait=queue_wait)


async def holder(slots: ConcurrencyLimit, subject: str, release: asyncio.Event, order: list[str]) -> None:
    async with slots.hold(subject):
        order.append(subject)
        await release.wait()


def test_waiters_get_freed_slots_in_order_of_arrival() -> None:
    async def scenario() -> list[str]:
        slots = limited(admits=1)
        order: list[str] = []
        first, rest = asyncio.Event(), asyncio.Event()
        held = asyncio.create_task(holder(slots, "a", first, order))
        await asyncio.sleep(0)
        waiting = []
        for name in ("b", "c", "d"):
            waiting.append(asyncio.create_task(holder(slots, name, rest, order)))
            await asyncio.sleep(0)
        assert slots.waiting == 3 and slots.active == 1
        first.set()  # a's slot goes to b, the oldest waiter
        await held
        await asyncio.sleep(0)
        rest.set()
        await asyncio.gather(*waiting)
        assert slots.active == 0 and slots.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["a", "b", "c", "d"]


def test_a_waiter_no_slot_reaches_in_time_is_refused_busy_and_counted() -> None:
    async def scenario() -> tuple[Busy, ConcurrencyLimit]:
        slots = limited(admits=1, queue_wait=0.2)
        release = asyncio.Event()
        held = asyncio.create_task(holder(slots, "a", release, []))
        await asyncio.sleep(0)
        with pytest.raises(Busy) as refused:
            await holder(slots, "b", release, [])
        release.set()
        await held
        return refused.value, slots

    refused, slots = asyncio.run(scenario())
    assert refused.retry_after == 2 and "no slot freed within 0.2 s" in str(refused)
    assert slots.adaptive_refusals == 1 and slots.waiting == 0 and slots.active == 0


@pytest.mark.parametrize(("admits", "cap", "per_subject"), [(2, 2, 8), (8, 8, 1)])
def test_at_the_cap_or_the_subjects_limit_the_refusal_is_at_once(admits: int, cap: int, per_subject: int) -> None:
    async def scenario() -> ConcurrencyLimit:
        slots = limited(admits=admits, cap=cap, per_subject=per_subject, queue_wait=30.0)
        release = asyncio.Event()
        holders = [asyncio.create_task(holder(slots, "a", release, [])) for _ in range(min(cap, per_subject))]
        await asyncio.sleep(0)
        async with asyncio.timeout(5):  # refused without the 30 s wait
            with pytest.raises(Busy):
                await holder(slots, "a", release, [])
        release.set()
        await asyncio.gather(*holders)
        return slots

    slots = asyncio.run(scenario())
    assert slots.waiting == 0 and slots.active == 0 and slots.adaptive_refusals == 0


def test_a_waiter_whose_client_goes_away_leaves_no_slot_behind() -> None:
    async def scenario() -> ConcurrencyLimit:
        slots = limited(admits=1)
        release = asyncio.Event()
        held = asyncio.create_task(holder(slots, "a", release, []))
        await asyncio.sleep(0)
        gone = asyncio.create_task(holder(slots, "b", release, []))
        await asyncio.sleep(0)
        assert slots.waiting == 1
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert slots.waiting == 0
        release.set()
        await held
        return slots

    slots = asyncio.run(scenario())
    assert slots.active == 0 and slots.waiting == 0


def test_a_slot_handed_to_a_waiter_that_is_cancelled_goes_to_the_next() -> None:
    async def scenario() -> list[str]:
        slots = limited(admits=1)
        order: list[str] = []
        first, rest = asyncio.Event(), asyncio.Event()
        held = asyncio.create_task(holder(slots, "a", first, order))
        await asyncio.sleep(0)
        handed = asyncio.create_task(holder(slots, "b", rest, order))
        await asyncio.sleep(0)
        after = asyncio.create_task(holder(slots, "c", rest, order))
        await asyncio.sleep(0)
        first.set()
        await held  # the slot is handed to b's future; b has not run yet
        handed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await handed
        rest.set()
        await after
        assert slots.active == 0 and slots.waiting == 0
        return order

    assert asyncio.run(scenario()) == ["a", "c"]


def test_a_slot_the_limit_gained_goes_to_the_oldest_waiter_when_the_next_newcomer_arrives() -> None:
    async def scenario() -> list[str]:
        slots = limited(admits=1)
        order: list[str] = []
        release = asyncio.Event()
        held = asyncio.create_task(holder(slots, "a", release, order))
        await asyncio.sleep(0)
        waiting = asyncio.create_task(holder(slots, "b", release, order))
        await asyncio.sleep(0)
        assert slots.waiting == 1
        assert slots.adaptive is not None
        slots.adaptive.limit = 3.0  # the limit grew (in a worker thread, with no slot released)
        newcomer = asyncio.create_task(holder(slots, "c", release, order))
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert slots.waiting == 0 and slots.active == 3  # b was handed its slot, c took the third
        release.set()
        await asyncio.gather(held, waiting, newcomer)
        return order

    assert sorted(asyncio.run(scenario())) == ["a", "b", "c"]
