"""Failure paths end by themselves: a move whose negotiation swallowed its cancellation (what Python
3.11's ``asyncio.wait_for`` does when the answer arrives with the cancel, the cause of pulls of damaged
storage that never ended), a phase that waits for a wakeup that never comes, and an exception raised
in a loop callback all end with an error instead of waiting forever."""

from __future__ import annotations

import ast
import asyncio
import pathlib
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import pytest

from smart_transfer.protocol.messages import HttpRequest, ObjectFile
from smart_transfer.transfer.errors import TransferFailed
from smart_transfer.transfer.mover import ObjectMover
from smart_transfer.transfer.watchdog import NoProgress, ProgressWatchdog
from tests.unit.test_mover import objects

T = TypeVar("T")

#: Every wait in these tests is bounded: a hang fails the test instead of stalling the suite.
BOUND_SECONDS = 20.0


def _url() -> HttpRequest:
    return HttpRequest(method="GET", url="http://x/", headers={}, expires_at=0)


class SwallowingSigner:
    """A negotiation that answers its second page at the moment the first object fails, and returns
    that answer even though its task was cancelled meanwhile (as 3.11's ``wait_for`` does)."""

    def __init__(self) -> None:
        self.failed = asyncio.Event()
        self.pages = 0

    async def negotiate(self, page: Sequence[ObjectFile]) -> list[tuple[ObjectFile, HttpRequest | None]]:
        self.pages += 1
        if self.pages > 1:
            try:
                await self.failed.wait()
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                await asyncio.sleep(0)  # the answer "arrived" with the cancellation: it is returned
        return [(item, _url()) for item in page]

    async def work(self, item: ObjectFile, request: HttpRequest) -> int:
        await asyncio.sleep(0.001)
        self.failed.set()
        raise TransferFailed(item.physical_hash, "content does not match its hash")


def run_bounded(operation: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` of ``operation``, failed after BOUND_SECONDS."""

    async def bounded() -> T:
        async with asyncio.timeout(BOUND_SECONDS):
            return await operation

    return asyncio.run(bounded())


def test_a_failed_move_ends_even_when_a_negotiation_swallows_its_cancellation() -> None:
    async def run() -> None:
        signer = SwallowingSigner()
        mover = ObjectMover(signer.negotiate, signer.work, parallel=2, page_size=4)
        with pytest.raises(TransferFailed, match="does not match"):
            await mover.move(objects(50))
        assert signer.pages >= 2, "the negotiation that swallowed the cancel ran"

    run_bounded(run())


def test_the_watchdog_ends_a_phase_waiting_for_a_wakeup_that_never_comes() -> None:
    async def run() -> None:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        async with ProgressWatchdog(0.4, lambda: "3 objects signed and waiting"):
            await never

    with pytest.raises(NoProgress) as raised:
        run_bounded(run())
    message = str(raised.value)
    assert "no progress" in message and "3 objects signed and waiting" in message
    assert "\n" not in message


def test_the_watchdog_waits_while_a_bounded_wait_is_in_flight() -> None:
    async def run() -> str:
        async with ProgressWatchdog(0.3, lambda: "nothing") as watchdog:
            with watchdog.in_flight():
                await asyncio.sleep(0.9)  # a slow transfer: its own timeouts bound it
            return "done"

    assert run_bounded(run()) == "done"


def test_an_exception_in_a_loop_callback_fails_the_operation() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()

        def broken() -> None:
            raise KeyError("a handle nobody knows")

        never: asyncio.Future[None] = loop.create_future()
        async with ProgressWatchdog(60.0, lambda: "nothing"):
            loop.call_soon(broken)
            await never

    with pytest.raises(NoProgress, match=r"event-loop callback.*KeyError"):
        run_bounded(run())


def test_no_module_uses_asyncio_wait_for() -> None:
    """Python 3.11's ``asyncio.wait_for`` returns the result and drops a cancellation that arrives
    with it; ``asyncio.timeout`` does not. The package uses only the latter."""
    root = pathlib.Path(__file__).resolve().parents[2] / "smart_transfer"
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            named = isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            if named and node.attr == "wait_for" and node.value.id == "asyncio":  # type: ignore[attr-defined]
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
