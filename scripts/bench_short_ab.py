"""Short operations of two source trees, interleaved in one run: an up-to-date pull, a no-op push and
``--version``, each command of tree A then of tree B (the order swapped every round), so that whatever
else the machine does falls on both alike. For a change that must not slow start-up down: run it with
the tree before the change and this one.

    .venv/bin/python scripts/bench_short_ab.py BEFORE_TREE [AFTER_TREE] [--rounds N]

Both trees run on this virtual environment's interpreter and packages (their own ``smart_transfer``
first on the path, compiled first); one embedded server of AFTER_TREE serves both.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_server import serve

HERE = Path(__file__).resolve().parents[1]


def _command(tree: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return [sys.executable, "-m", "smart_transfer.cli", *args], env


def _run(tree: Path, *args: str) -> float:
    command, env = _command(tree, *args)
    started = time.perf_counter()
    subprocess.run(command, env=env, capture_output=True, check=True, timeout=120)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path, help="the source tree before the change")
    parser.add_argument("after", type=Path, nargs="?", default=HERE, help="the tree after it (default: this one)")
    parser.add_argument("--rounds", type=int, default=15, help="rounds of every command (default 15)")
    args = parser.parse_args()
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for tree in trees.values():
        compileall.compile_dir(tree / "smart_transfer", quiet=1)
    with tempfile.TemporaryDirectory(prefix="short-ab-") as scratch:
        top = Path(scratch)
        command, env = _command(trees["after"])
        server, url = serve(command, top / "server", env)
        try:
            data = top / "part.bin"
            data.write_bytes(os.urandom(4096))
            times: dict[tuple[str, str], list[float]] = {}
            for label, tree in trees.items():
                _run(tree, "add", "ab", str(data), "--workspace", str(top / f"a-{label}"))
                _run(tree, "push", "ab", f"{url}/ab-{label}", "--workspace", str(top / f"a-{label}"))
                _run(tree, "pull", f"{url}/ab-{label}", "--workspace", str(top / f"b-{label}"))
            for number in range(args.rounds):
                order = list(trees.items()) if number % 2 == 0 else list(reversed(trees.items()))
                for label, tree in order:
                    cases = {
                        "up-to-date pull": ("pull", f"ab-{label}", "--workspace", str(top / f"b-{label}")),
                        "no-op push": ("push", "ab", "--workspace", str(top / f"a-{label}")),
                        "--version": ("--version",),
                    }
                    for case, argv in cases.items():
                        times.setdefault((case, label), []).append(_run(tree, *argv))
        finally:
            server.terminate()
            server.wait(10)
    print(f"{'case':18} {'before (s)':>11} {'after (s)':>10} {'after/before':>13}   medians of {args.rounds}")
    for case in ("up-to-date pull", "no-op push", "--version"):
        before = statistics.median(times[(case, "before")])
        after = statistics.median(times[(case, "after")])
        print(f"{case:18} {before:11.3f} {after:10.3f} {after / before:13.2f}")


if __name__ == "__main__":
    main()
