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
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


async def run_pieces(
    pieces: Sequence[T], work: Callable[[T], Awaitable[None]], parallel: int, slots: asyncio.Semaphore | None
) -> None:
    """``work`` on every piece, by at most ``parallel`` workers (see the module docstring); the first
    failure cancels the others and is raised as it is."""
    queue: Iterator[T] = iter(pieces)

    def slot(index: int) -> AbstractAsyncContextManager[object]:
        return nullcontext() if index == 0 or slots is None else slots

    async def worker(index: int) -> None:
        while True:
            async with slot(index):
                piece = next(queue, None)
                if piece is None:
                    return
                await work(piece)

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
