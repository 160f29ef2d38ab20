"""The console script's deferred modules: not loaded by an import statement, loaded by the first read, and
then the same module for every holder. Each probe runs in its own interpreter (it edits ``sys.modules``)."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from smart_transfer.cli.deferred import defer_unread_modules
defer_unread_modules()
import importlib.metadata
from importlib import metadata as held
import websockets.asyncio.client  # imports both deferred modules and reads nothing from them
print("LOADED:", "importlib.metadata._meta" in sys.modules, "http.client" in sys.modules)
{reads}
"""


def _probe(reads: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(reads=reads)], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout.split("\n")[:-1]


def test_an_import_statement_does_not_load_a_deferred_module() -> None:
    assert _probe("") == ["LOADED: False False"]


def test_the_first_read_loads_it_for_every_holder() -> None:
    reads = (
        "from importlib.metadata import version\n"
        "print(version('websockets') == held.version('websockets') == importlib.metadata.version('websockets'))\n"
        "print('LOADED:', 'importlib.metadata._meta' in sys.modules, 'http.client' in sys.modules)\n"
        "real = sys.modules['importlib.metadata']\n"
        "print(real is importlib.metadata, held.Distribution is version.__globals__['Distribution'])"
    )
    assert _probe(reads) == ["LOADED: False False", "True", "LOADED: True False", "True True"]


def test_a_submodule_import_loads_its_package() -> None:
    reads = "import importlib.metadata._adapters\nprint(importlib.metadata.PackageNotFoundError.__name__)"
    assert _probe(reads) == ["LOADED: False False", "PackageNotFoundError"]


def test_reading_a_deferred_module_loads_only_that_one() -> None:
    reads = (
        "from urllib.request import getproxies\n"
        "print(callable(getproxies), 'http.client' in sys.modules, 'importlib.metadata._meta' in sys.modules)"
    )
    assert _probe(reads) == ["LOADED: False False", "True True False"]


def test_a_holder_of_the_stand_in_reads_and_patches_the_real_module() -> None:
    """What is written through the stand-in (a test's patch, say) lands on the real module, and what the
    real module changes later shows through the stand-in."""
    reads = (
        "import urllib.request as early  # the stand-in, taken before any read\n"
        "from unittest import mock\n"
        "with mock.patch.object(early, 'getproxies', lambda: {'https': 'patched'}):\n"
        "    print(sys.modules['urllib.request'].getproxies()['https'])\n"
        "print(sys.modules['urllib.request'].getproxies is early.getproxies)\n"
        "sys.modules['urllib.request'].install_opener('opener')\n"
        "print(early._opener, 'getproxies' in dir(early))"
    )
    assert _probe(reads) == ["LOADED: False False", "patched", "True", "opener True"]


def test_the_console_script_defers_them() -> None:
    """``console()`` puts the stand-ins in place before the command runs (here: a command that only
    imports websockets and looks)."""
    probe = (
        "import sys\n"
        "from smart_transfer.cli import main as cli\n"
        "def command(argv=None):\n"
        "    import websockets.asyncio.client\n"
        "    print(type(sys.modules['urllib.request']).__name__, type(sys.modules['importlib.metadata']).__name__)\n"
        "    return 0\n"
        "cli.main = command\n"
        "cli.console()"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["DeferredModule", "DeferredModule"]


def test_a_module_already_loaded_is_left_alone() -> None:
    probe = (
        "import importlib.metadata, sys\n"
        "from smart_transfer.cli.deferred import defer_unread_modules\n"
        "defer_unread_modules()\n"
        "print(type(sys.modules['importlib.metadata']).__name__)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "module"
