"""Where each dataset of a workspace syncs with when no URL is given: one small file per dataset
under ``{workspace}/remotes/``. Not in the index: the index is a cache that can be deleted and rebuilt
from the store, and this is a user's setting. URLs are checked by the client's URL parser before they
get here (which refuses credentials in a URL, so none is ever written)."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from smart_transfer.model import DatasetName, InvalidDatasetName


class Remotes:
    """The remote URL of each dataset of one workspace."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)

    def _path(self, name: DatasetName) -> Path:
        return self.directory / name

    def get(self, name: DatasetName) -> str | None:
        """The dataset's remote URL, None when it has none."""
        try:
            return self._path(name).read_text().strip() or None
        except FileNotFoundError:
            return None

    def _temp(self, url: str) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        temp = self.directory / f".{secrets.token_hex(8)}.tmp"
        temp.write_text(url + "\n")
        return temp

    def set(self, name: DatasetName, url: str) -> None:
        """Make ``url`` the dataset's remote (replacing any), atomically."""
        os.replace(self._temp(url), self._path(name))

    def remember(self, name: DatasetName, url: str) -> bool:
        """Make ``url`` the dataset's remote unless it already has one; True when it was recorded.
        Atomic (a hard link fails when the file exists), so two racing first syncs keep one URL."""
        if self.get(name) is not None:
            return False
        temp = self._temp(url)
        try:
            os.link(temp, self._path(name))
        except FileExistsError:
            return False
        finally:
            temp.unlink()
        return True

    def remove(self, name: DatasetName) -> bool:
        """Forget the dataset's remote; False when it had none."""
        try:
            self._path(name).unlink()
        except FileNotFoundError:
            return False
        return True

    def items(self) -> Iterator[tuple[DatasetName, str]]:
        """Every dataset with a remote, in name order."""
        if not self.directory.is_dir():
            return
        for path in sorted(self.directory.iterdir()):
            with contextlib.suppress(InvalidDatasetName):
                name = DatasetName(path.name)
                url = self.get(name)
                if url is not None:
                    yield name, url
