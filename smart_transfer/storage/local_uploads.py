"""Multipart uploads of the embedded store, S3's flow on local files: each upload is a directory under
the store's internal directory (never a key), each part a file named by its number and MD5; completing
checks the parts like S3 does (every one present with the MD5 it is named with, all but the last at
least 5 MiB), concatenates them into a temporary file and renames it into place. The assembled
object's ETag is S3's multipart ETag, kept beside it (``etags/``) so it survives a restart."""

from __future__ import annotations

import os
import re
import secrets
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

from smart_transfer.storage.base import PendingUpload, UploadedPart, check_key, check_prefix
from smart_transfer.storage.errors import MultipartRefused, NoSuchUpload, StorageUnavailable
from smart_transfer.storage.parts import MAX_PARTS, MIN_PART_BYTES

_UPLOAD_ID = re.compile(r"[0-9a-f]{32}")
_PART_FILE = re.compile(r"(\d{5})\.([0-9a-f]{32})")
#: Bytes copied per call while assembling parts.
COPY_CHUNK_BYTES = 64 * 1024 * 1024


def _copy_into(source: Path, out_fd: int) -> None:
    """Append the file ``source`` to ``out_fd`` inside the kernel where it can (copy_file_range)."""
    with open(source, "rb") as src:
        remaining = os.fstat(src.fileno()).st_size
        while remaining > 0:
            try:
                copied = os.copy_file_range(src.fileno(), out_fd, min(COPY_CHUNK_BYTES, remaining))
            except OSError:
                copied = os.write(out_fd, src.read(min(COPY_CHUNK_BYTES, remaining)))
            if copied == 0:
                raise StorageUnavailable(f"part {source.name} shrank while it was assembled")
            remaining -= copied


class LocalUploads:
    """The multipart uploads of one LocalStore, kept under ``directory``."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageUnavailable(f"cannot create {directory}: {exc.strerror}") from None

    def create(self, key: str) -> str:
        """Start an upload of ``key``; its id."""
        check_key(key)
        upload_id = secrets.token_hex(16)
        folder = self.directory / upload_id
        try:
            folder.mkdir()
            (folder / "key").write_text(key)
        except OSError as exc:
            raise StorageUnavailable(f"cannot start an upload of {key}: {exc.strerror}") from None
        return upload_id

    def folder(self, key: str, upload_id: str) -> Path:
        """The directory of upload ``upload_id`` of ``key``; NoSuchUpload when there is none."""
        if _UPLOAD_ID.fullmatch(upload_id) is None:
            raise NoSuchUpload(key, upload_id)
        folder = self.directory / upload_id
        try:
            if (folder / "key").read_text() != key:
                raise NoSuchUpload(key, upload_id)
        except (FileNotFoundError, NotADirectoryError):
            raise NoSuchUpload(key, upload_id) from None
        return folder

    def pending(self, prefix: str) -> Iterator[PendingUpload]:
        """The uploads in progress of keys under ``prefix``."""
        check_prefix(prefix)
        found = []
        for folder in self.directory.iterdir():
            try:
                marker = folder / "key"
                key, initiated = marker.read_text(), marker.stat().st_mtime
            except (FileNotFoundError, NotADirectoryError):
                continue  # completed or aborted meanwhile
            if key.startswith(prefix):
                found.append(PendingUpload(key, folder.name, initiated))
        yield from sorted(found, key=lambda upload: (upload.key, upload.initiated))

    def parts(self, key: str, upload_id: str) -> list[UploadedPart]:
        """The parts the upload holds, by number (NoSuchUpload when it is gone)."""
        folder = self.folder(key, upload_id)
        newest: dict[int, tuple[int, UploadedPart]] = {}
        for entry in os.scandir(folder):
            match = _PART_FILE.fullmatch(entry.name)
            if match is None:
                continue
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue  # replaced by a newer copy of the same part
            number = int(match.group(1))
            if number not in newest or newest[number][0] < stat.st_mtime_ns:
                newest[number] = (stat.st_mtime_ns, UploadedPart(number, stat.st_size, match.group(2)))
        return [newest[number][1] for number in sorted(newest)]

    def check_part_number(self, key: str, upload_id: str, number: int) -> Path:
        """The upload's directory, if part ``number`` may be sent to it."""
        if not 1 <= number <= MAX_PARTS:
            raise MultipartRefused(f"part numbers are 1..{MAX_PARTS}, not {number}")
        return self.folder(key, upload_id)

    def adopt_part(self, key: str, upload_id: str, number: int, temp: Path, md5_hex: str) -> UploadedPart:
        """Move a received part (checked against its MD5) into its upload, replacing an earlier copy."""
        folder = self.check_part_number(key, upload_id, number)
        name = f"{number:05d}.{md5_hex}"
        try:
            os.replace(temp, folder / name)
            size = (folder / name).stat().st_size
        except FileNotFoundError:
            temp.unlink(missing_ok=True)
            raise NoSuchUpload(key, upload_id) from None  # completed or aborted while the part arrived
        for entry in os.scandir(folder):
            if entry.name.startswith(f"{number:05d}.") and entry.name != name:
                Path(entry.path).unlink(missing_ok=True)
        return UploadedPart(number, size, md5_hex)

    def assemble(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]], temp: Path) -> None:
        """Check ``parts`` against what the upload holds and write them, in order, to ``temp``."""
        self._check_parts(key, upload_id, parts)
        folder = self.folder(key, upload_id)
        try:
            with open(temp, "wb") as out:
                for number, md5_hex in parts:
                    _copy_into(folder / f"{number:05d}.{md5_hex}", out.fileno())
        except FileNotFoundError:
            temp.unlink(missing_ok=True)
            raise NoSuchUpload(key, upload_id) from None
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise StorageUnavailable(f"cannot assemble {key}: {exc.strerror}") from None

    def _check_parts(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> None:
        """Refuse what S3 refuses: parts out of order or twice, a part not held with that MD5, a part
        other than the last smaller than the minimum."""
        numbers = [number for number, _ in parts]
        if not numbers or numbers != sorted(set(numbers)):
            raise MultipartRefused(f"{key}: InvalidPartOrder: parts must be named once each, ascending")
        held = {part.number: part for part in self.parts(key, upload_id)}
        for index, (number, md5_hex) in enumerate(parts):
            part = held.get(number)
            if part is None or part.etag != md5_hex:
                raise MultipartRefused(f"{key}: InvalidPart: part {number} is not uploaded with MD5 {md5_hex}")
            if index < len(parts) - 1 and part.size < MIN_PART_BYTES:
                raise MultipartRefused(f"{key}: EntityTooSmall: part {number} has {part.size} bytes")

    def drop(self, key: str, upload_id: str) -> None:
        """Remove an upload and its parts (nothing when it is unknown)."""
        try:
            folder = self.folder(key, upload_id)
        except NoSuchUpload:
            return
        shutil.rmtree(folder, ignore_errors=True)
