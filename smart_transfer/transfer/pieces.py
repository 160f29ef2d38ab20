"""Bounded parallel work, one implementation: ``run_pieces`` (workers pulling from one queue) and
``in_parallel`` (a map over it, results in order).

Moving the pieces of one large object (ranges of a download, parts of an upload) in parallel without
oversubscribing the connection pool: the object already holds one of the flow's transfer slots, and
its first worker runs on that one; every other worker takes a slot of its own from the same pool
before it picks a piece. So the requests in flight never exceed ``--parallel``, a large object next to
many small ones still progresses (its first worker never waits), and a lone large object spreads over
the free connections."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def run_pieces(
    pieces: Sequence[T], work: Callable[[T], Awaitable[None]], parallel: int, slots: asyncio.Semaphore | None
) -> None:
    """``work`` on every piece, by at most ``parallel`` workers (see the module docstring); the first
    failure cancels the others and is raised as it is. Once no piece is left, the workers still waiting
    for a slot stop waiting: when every slot is held by an object whose other workers wait for one (as
    many ranged objects at once do), the objects' first workers finish them and the waiters would
    otherwise hold each object, and its slot, forever."""
    queue: Iterator[T] = iter(pieces)
    exhausted = False
    waiting: set[asyncio.Task[None]] = set()

    def take() -> T | None:
        nonlocal exhausted
        piece = next(queue, None)
        if piece is None:
            exhausted = True
            for waiter in waiting:
                waiter.cancel()  # a cancelled child is no failure of the group
        return piece

    async def acquire(shared: asyncio.Semaphore) -> None:
        task = asyncio.current_task()
        assert task is not None
        waiting.add(task)
        try:
            await shared.acquire()
        finally:
            waiting.discard(task)

    async def worker(index: int) -> None:
        shared = None if index == 0 else slots  # the first worker runs on the object's own slot
        while not (shared is not None and exhausted):
            if shared is not None:
                await acquire(shared)
            try:
                if (piece := take()) is None:
                    return
                await work(piece)
            finally:
                if shared is not None:
                    shared.release()

    try:
        async with asyncio.TaskGroup() as group:
            for index in range(max(1, min(parallel, len(pieces)))):
                group.create_task(worker(index))
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None


async def in_parallel(items: Sequence[T], work: Callable[[T], Awaitable[R]], parallel: int) -> list[R]:
    """``work`` on every item, at most ``parallel`` at a time; the results in the items' order. The
    first failure cancels the rest and is raised as it is."""
    results: dict[int, R] = {}

    async def one(index: int) -> None:
        results[index] = await work(items[index])

    await run_pieces(range(len(items)), one, parallel, None)
    return [results[index] for index in range(len(items))]
