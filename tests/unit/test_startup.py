"""Start-up: the command line's parser (so --help and --version) loads no heavy library; each command
imports what it needs when it runs. Time itself is measured in ``make bench``, not here."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from smart_transfer.cli.commands.common import Parser
from smart_transfer.cli.main import COMMAND_MODULES, build_parser

#: Libraries that cost tens of milliseconds or more to import, none needed to parse a command line.
HEAVY = (
    "pydantic",
    "msgspec",
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


#: What a pull or push loads only once objects move (the HTTP stack), or never (other commands' and the
#: server's libraries, and the project's modules only other commands use).
NOT_BEFORE_OBJECTS_MOVE = (
    "aiohttp",
    "yarl",
    "pycurl",
    "boto3",
    "botocore",
    "pyarrow",
    "pandas",
    "fastapi",
    "starlette",
    "uvicorn",
    "pyspark",
    "smart_transfer.server",
    "smart_transfer.ingest",
    "smart_transfer.peer",
    "smart_transfer.reading",
    "smart_transfer.protocol.rest",
    "smart_transfer.transfer.http",
)


def test_the_sdk_reaches_the_server_before_loading_the_http_stack() -> None:
    """A pull or push opens its session first; aiohttp (the object transfers) loads while the server plans.
    Parsing a pull's command line builds only its command module's parsers (not the server's settings)."""
    probe = (
        "import sys\n"
        "from smart_transfer.cli.main import build_parser\n"
        "build_parser(['pull', 'http://h/d']).parse_args(['pull', 'http://h/d'])\n"
        "import smart_transfer.client.client, smart_transfer.cli.commands.transfer, smart_transfer.cli.progress\n"
        f"heavy = {NOT_BEFORE_OBJECTS_MOVE!r}\n"
        "print('HEAVY:' + ','.join(sorted(n for n in sys.modules if n.startswith(heavy))))\n"
        "print('COMMANDS:' + ','.join(sorted(n for n in sys.modules if n.startswith('smart_transfer.cli.commands.'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-2:] == [
        "HEAVY:",
        "COMMANDS:smart_transfer.cli.commands.common,smart_transfer.cli.commands.transfer",
    ]


def test_every_command_is_registered_by_the_module_the_table_names() -> None:
    """``COMMAND_MODULES`` (which module to load for a command line) says what the modules register, in
    the order of the full parser's --help."""
    full = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert list(full) == list(COMMAND_MODULES)
    for module in dict.fromkeys(COMMAND_MODULES.values()):
        parser = Parser(prog="probe")
        commands = parser.add_subparsers()
        importlib.import_module(f"smart_transfer.cli.commands.{module}").register(commands)
        assert sorted(commands.choices) == sorted(c for c, m in COMMAND_MODULES.items() if m == module)
    for command in COMMAND_MODULES:  # the lean parser reads a command's line as the full one does
        args = build_parser([command, "--help"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
        assert args[command].format_help() == full[command].format_help()


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


def test_objects_moved_by_libcurl_load_no_aiohttp() -> None:
    """aiohttp (and its TLS contexts, a quarter second of start-up here) loads only for the transfers it
    makes: a rate limit, the simple protocol, peers. A libcurl transfer's modules and engine do without."""
    probe = (
        "import asyncio, sys\n"
        "import smart_transfer.client.transports.smart, smart_transfer.client.flows.pull\n"
        "import smart_transfer.client.flows.push, smart_transfer.transfer.http, smart_transfer.transfer.ranges\n"
        "from smart_transfer.transfer.limits import Timeouts\n"
        "from smart_transfer.transfer.choice import open_transport\n"
        "async def main():\n"
        "    async with open_transport(4, Timeouts()) as transport:\n"
        "        print('ENGINE:' + type(transport).__name__)\n"
        "asyncio.run(main())\n"
        "print('AIOHTTP:' + ','.join(sorted(n for n in sys.modules if n.startswith(('aiohttp', 'yarl')))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-2:] == ["ENGINE:CurlEngine", "AIOHTTP:"], done.stdout
