"""Where a command writes a path the user named (``export``'s output, a profile file): the one rule
every such command follows.

- ``-`` is standard output.
- A symlink is followed: what it points to is written (a dangling link creates its target); the link
  itself is never replaced.
- A regular file (or a new one) is written under a temporary name beside it and renamed over it when
  complete, so a failed write leaves no partial file and the old content intact.
- A character device (``/dev/null``, a terminal) or a FIFO is written in place, never replaced. A FIFO
  that no process reads is refused at once instead of waiting for a reader.
- Anything else (a directory, a block device, a socket) is refused.

A path that cannot be a target (a directory, a missing directory, a block device) is a usage error
(``LocalError`` InvalidRequest: exit 2); a write that fails, a full device included, is an
:class:`OutputError` (an OSError: exit 1). Both name the user's path, never the temporary file, and
nothing is left behind."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from smart_transfer.errors import LocalError
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.storage.durable import sync_directory


class OutputError(OSError):
    """An output path that cannot be written; the message names the path as the user gave it."""


def _refusal(path: str, reason: str) -> OutputError:
    return OutputError(f"cannot write {path}: {reason}")


def _not_a_target(path: str, reason: str) -> LocalError:
    """A path no export can write to at all: a usage error (exit 2), before anything is written."""
    return LocalError(ErrorCode.INVALID_REQUEST, f"cannot write {path}: {reason}")


def _failure(path: str, exc: OSError) -> OutputError:
    return _refusal(path, exc.strerror or str(exc))


@contextlib.contextmanager
def open_output(path: str, mode: int = 0o666) -> Iterator[IO[bytes]]:
    """A binary sink for ``path`` under the rule above; the output is complete (renamed into place, or
    flushed to the device) when the block ends without an exception. ``mode``: the permissions of a
    regular file written (before the umask; 0o600 for a file holding a secret)."""
    if not path.strip() or path.endswith("/"):
        raise _not_a_target(path, "a file path is needed (not empty, not ending in /)")
    if path == "-" or _open_descriptor(path):
        if path != "-":  # /dev/stdout, /dev/fd/N: the descriptor this process already has (its offset too)
            with _guarded(path), open(os.dup(_descriptor_number(path)), "wb") as sink:
                yield sink
                _complete(sink)
            return
        with _guarded(path):
            yield sys.stdout.buffer
            _complete(sys.stdout.buffer)
        return
    kind = _kind_of(path)
    if kind is None or stat.S_ISREG(kind):
        # a replaced file keeps its permissions (never wider than ``mode``: a secret stays private)
        kept = stat.S_IMODE(kind) & mode if kind is not None else None
        with _replacing(path, Path(os.path.realpath(path)), mode, kept) as sink:  # a dangling link: its target
            yield sink
    elif stat.S_ISCHR(kind) or stat.S_ISFIFO(kind):
        with _in_place(path, fifo=stat.S_ISFIFO(kind)) as sink:
            yield sink
    elif stat.S_ISDIR(kind):
        raise _not_a_target(path, "it is a directory")
    else:
        raise _not_a_target(path, "it is neither a regular file, a character device nor a FIFO")


def _descriptor_number(path: str) -> int:
    named = {"/dev/stdout": 1, "/dev/stderr": 2}
    return named[path] if path in named else int(path.rsplit("/", 1)[1])


def _kind_of(path: str) -> int | None:
    """The file type and mode of what ``path`` (links followed) names; None when nothing is there."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _failure(path, exc) from None


def _open_descriptor(path: str) -> bool:
    """Whether ``path`` names a descriptor this process already has open (``/dev/stdout``, ``/dev/fd/1``):
    written in place whatever it is, so a redirected standard output is appended to, never replaced."""
    if path in ("/dev/stdout", "/dev/stderr"):
        return True
    prefix = next((p for p in ("/dev/fd/", "/proc/self/fd/") if path.startswith(p)), None)
    return prefix is not None and path[len(prefix) :].isdigit()


@contextlib.contextmanager
def _guarded(path: str) -> Iterator[None]:
    try:
        yield
    except (OutputError, BrokenPipeError):
        raise  # a reader that went away (`export - | head`) is not a failed write
    except OSError as exc:
        raise _failure(path, exc) from None


@contextlib.contextmanager
def _replacing(path: str, target: Path, mode: int, kept: int | None) -> Iterator[IO[bytes]]:
    if not target.parent.is_dir():
        raise _not_a_target(path, f"no such directory {target.parent}")
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    try:
        created = os.fdopen(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb")
    except OSError as exc:  # /proc, /sys, a read-only mount: say where, not the temporary name
        raise _refusal(path, f"cannot create a file in {target.parent} ({exc.strerror or exc})") from None
    try:
        with _guarded(path), created as sink:
            if kept is not None:
                os.fchmod(sink.fileno(), kept)
            yield sink
            sink.flush()
            os.fsync(sink.fileno())
        with _guarded(path):
            os.replace(temp, target)
        sync_directory(target.parent)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()


@contextlib.contextmanager
def _in_place(path: str, *, fifo: bool) -> Iterator[IO[bytes]]:
    flags = os.O_WRONLY | (os.O_NONBLOCK if fifo else 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as exc:
        if fifo and exc.errno == errno.ENXIO:
            raise _refusal(path, "no process is reading this FIFO") from None
        raise _failure(path, exc) from None
    if fifo:
        os.set_blocking(descriptor, True)  # a reader is there: writes may now wait for it
    with _guarded(path), open(descriptor, "wb") as sink:
        yield sink
        _complete(sink)


def _complete(sink: IO[bytes]) -> None:
    """Flush ``sink`` (a write the device refuses, a full one, raises here) and, when the descriptor is a
    regular file after all (standard output redirected to one), sync it to disk."""
    sink.flush()
    if stat.S_ISREG(os.fstat(sink.fileno()).st_mode):
        os.fsync(sink.fileno())


@contextlib.contextmanager
def output_written(path: str, content: bytes, mode: int = 0o666) -> Iterator[None]:
    """Write ``content`` to ``path`` completely and durably (under the rule above) before the block runs;
    when the block fails, a file this created is removed again (a device, a FIFO, standard output or a
    file that was there before cannot be taken back). For an output that must exist before what refers to
    it does, such as a profile holding a token that is added to the tokens file only once it is written."""
    created = path != "-" and not _open_descriptor(path) and _kind_of(path) is None
    with open_output(path, mode) as sink:
        sink.write(content)
    try:
        yield
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.unlink(os.path.realpath(path))
        raise
