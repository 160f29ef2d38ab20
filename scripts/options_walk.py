"""Follow the client's options through a real pull and push and say how the walk goes: which modules
(rooms) it enters, in which order, how often it goes back into a module it had left (revisits), and how
often a call goes back up the layers (a module deeper in the client calls one nearer the command line,
through a callback). A design measure, not a test: it prints figures to compare before and after a change.

It starts the embedded server on a free loopback port, adds a small dataset, then runs the CLI's ``push``
and ``pull`` in this process with a profiler that records every call of a project function that is
handed the options or something built from them (an argument of one of the OPTION_TYPES).

    .venv/bin/python scripts/options_walk.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_server import serve

#: The records a walk follows: the declared options and what a flow carries them in (the bounds they
#: hand the data plane, Timeouts and LargeObjects, are values passed down, not followed).
OPTION_TYPES = ("ClientOptions", "FlowOptions", "FlowJob", "_Job")
#: How deep in the client's layers a module sits: the command line on top, the data plane at the bottom.
DEPTH = (
    ("smart_transfer.cli", 0),
    ("smart_transfer.client.client", 1),
    ("smart_transfer.client.sync_client", 1),
    ("smart_transfer.client.options", 1),
    ("smart_transfer.client.flows.job", 2),
    ("smart_transfer.client.flows.pull", 2),
    ("smart_transfer.client.flows.push", 2),
    ("smart_transfer.client.flows.moving", 3),
    ("smart_transfer.client.flows.objects", 4),
    ("smart_transfer.client.flows", 2),
    ("smart_transfer.client.transports", 5),
    ("smart_transfer.client", 2),
    ("smart_transfer.transfer", 6),
)


def depth(module: str) -> int:
    """The layer of ``module`` (0: the command line; a flow above what moves its objects, which is above
    one object's move); 7 for anything below the data plane."""
    for prefix, level in DEPTH:
        if module == prefix or module.startswith(prefix + "."):
            return level
    return 7


def _carries_options(frame: FrameType) -> bool:
    code = frame.f_code
    # handed as an argument, or held by a closure (a callback a flow gives the layer below it)
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount] + code.co_freevars
    return any(type(frame.f_locals.get(name)).__name__ in OPTION_TYPES for name in names)


def _module(frame: FrameType | None) -> str:
    return frame.f_globals.get("__name__", "") if frame is not None else ""


def _project_frames(frame: FrameType | None) -> list[str]:
    """The project modules on the stack from ``frame`` up, nearest first (the standard library's frames,
    contextlib's or asyncio's, are passed over: a call through them is the project's call)."""
    modules = []
    while frame is not None:
        if _module(frame).startswith("smart_transfer."):
            modules.append(_module(frame))
        frame = frame.f_back
    return modules


class Step(NamedTuple):
    """One call of the walk: the module that made it, the module called, and whether it went back up (to
    a module nearer the command line, or to one already waiting further up the stack: a callback)."""

    caller: str
    callee: str
    climb: bool


def record(operation: Callable[[], object]) -> list[Step]:
    """Every call of a project function handed the options (or what carries them), as an argument or
    through a closure, while ``operation``
    ran, in order."""
    walk: list[Step] = []
    entered: list[FrameType] = []  # frames seen: a coroutine's every resumption is a "call" event too

    def profile(frame: FrameType, event: str, _: Any) -> None:
        if event != "call" or any(frame is seen for seen in entered):
            return
        callee = _module(frame)
        if not callee.startswith("smart_transfer.") or not _carries_options(frame):
            return
        entered.append(frame)
        stack = _project_frames(frame.f_back)
        caller = stack[0] if stack else "(event loop)"
        up = caller != callee and (depth(callee) < depth(caller) or callee in stack[1:])
        walk.append(Step(caller, callee, up))

    sys.setprofile(profile)
    try:
        operation()
    finally:
        sys.setprofile(None)
    return walk


def figures(walk: list[Step]) -> dict[str, Any]:
    """Rooms (modules the walk enters), arrows (distinct calls from one module into another), stays
    (calls within one module), revisits (entries into a module entered before, other than the same call
    repeated in a loop, one per object) and climbs (calls back up the layers)."""
    rooms: list[str] = []
    arrows: set[tuple[str, str]] = set()
    stays = revisits = 0
    climbs = 0
    previous = Step("", "", climb=False)
    for step in walk:
        if step.caller == step.callee:
            stays += 1
            continue
        arrows.add((step.caller, step.callee))
        if step.caller not in rooms:
            rooms.append(step.caller)
        if step.callee in rooms:
            # a loop over objects repeats one arrow: one visit; coming back by another way is a revisit
            revisits += (previous.caller, previous.callee) != (step.caller, step.callee)
        else:
            rooms.append(step.callee)
        climbs += step.climb
        previous = step

    def short(name: str) -> str:
        return name.removeprefix("smart_transfer.")

    return {
        "rooms": len(rooms),
        "arrows": len(arrows),
        "stays": stays,
        "revisits": revisits,
        "climbs": climbs,
        "path": [
            f"{short(s.caller)} -> {short(s.callee)}" + (" (climb)" if s.climb else "")
            for s in walk
            if s.caller != s.callee
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    from smart_transfer.cli.main import main as cli

    with tempfile.TemporaryDirectory(prefix="options-walk-") as scratch:
        top = Path(scratch)
        server, url = serve([sys.executable, "-m", "smart_transfer.cli"], top / "server")
        try:
            inputs = []
            for number in range(3):
                path = top / f"part-{number}.bin"
                path.write_bytes(os.urandom(2000))
                inputs.append(str(path))
            assert cli(["add", "walk", *inputs, "--workspace", str(top / "a")]) == 0
            result = {}
            for name, argv in (
                ("push", ["push", "walk", f"{url}/walk", "--workspace", str(top / "a")]),
                ("pull", ["pull", f"{url}/walk", "--workspace", str(top / "b")]),
            ):
                codes: list[int] = []
                walk = record(lambda argv=argv, codes=codes: codes.append(cli(argv)))
                assert codes == [0], f"{name} failed"
                result[name] = figures(walk)
        finally:
            server.terminate()
            server.wait(10)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for name, found in result.items():
        print(f"{name}: " + ", ".join(f"{key} {value}" for key, value in found.items() if key != "path"))
        for arrow in found["path"]:
            print(f"  {arrow}")


if __name__ == "__main__":
    main()
