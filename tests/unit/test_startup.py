"""Start-up: the command line's parser (so --help and --version) loads no heavy library; each command
imports what it needs when it runs. Time itself is measured in ``make bench``, not here."""

from __future__ import annotations

import subprocess
import sys

import pytest

#: Libraries that cost tens of milliseconds or more to import, none needed to parse a command line.
HEAVY = (
    "pydantic",
    "aiohttp",
    "websockets",
    "boto3",
    "botocore",
    "pyarrow",
    "fastapi",
    "uvicorn",
    "pyspark",
    "rocksdict",
    "asyncio",
    "orjson",
)

PROBE = """
import sys
from smart_transfer.cli.main import build_parser
parser = build_parser()
for argv in {argvs!r}:
    try:
        parser.parse_args(argv)
    except SystemExit:
        pass
heavy = sorted({{name.split(".")[0] for name in sys.modules}} & set({heavy!r}))
print("HEAVY:" + ",".join(heavy))
"""


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["pull", "--help"], ["serve", "--help"], ["ingest", "--help"], ["status", "--help"]],
)
def test_parsing_the_command_line_loads_no_heavy_library(argv: list[str]) -> None:
    probe = PROBE.format(argvs=[argv], heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    heavy = done.stdout.strip().splitlines()[-1].removeprefix("HEAVY:")
    assert heavy == "", f"{' '.join(argv)} imported {heavy}"


def test_the_sdk_reaches_the_server_before_loading_the_http_stack() -> None:
    """A pull or push opens its session first; aiohttp (the object transfers) loads while the server plans."""
    probe = (
        "import sys, smart_transfer.client.client, smart_transfer.cli.commands.transfer\n"
        "print('HEAVY:' + ','.join(sorted({n.split('.')[0] for n in sys.modules} & {'aiohttp', 'yarl', 'boto3'})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "HEAVY:"


def test_a_pull_or_push_with_no_object_to_move_never_loads_the_http_stack() -> None:
    """Metadata-only pulls (a 100,000-block chain) and pushes with nothing new skip aiohttp's import."""
    probe = (
        "import asyncio, sys\n"
        "from smart_transfer.client.flows.moving import move_objects\n"
        "result = asyncio.run(move_objects(None, None, [], 1, None))\n"
        "print(result.transferred, result.skipped, 'aiohttp' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["0", "0", "False"]
