"""Remote dataset URLs: ``http(s)://HOST[:PORT][/PREFIX]/DATASET``."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from smart_transfer.client.errors import EXIT_USAGE, CliError
from smart_transfer.model import DatasetName, InvalidDatasetName


@dataclass(frozen=True, slots=True)
class RemoteDataset:
    """A dataset on a smart-transfer server."""

    base_url: str  # http(s)://host:port[/prefix], no trailing slash
    name: DatasetName

    @classmethod
    def parse(cls, url: str) -> RemoteDataset:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise CliError(f"not a dataset URL: {url!r} (expected http(s)://HOST:PORT/DATASET)", EXIT_USAGE)
        if parts.query or parts.fragment:
            raise CliError(f"a dataset URL has no query or fragment: {url!r}", EXIT_USAGE)
        prefix, _, name = parts.path.rstrip("/").rpartition("/")
        try:
            dataset = DatasetName(name)
        except InvalidDatasetName as exc:
            raise CliError(f"{url!r}: {exc}", EXIT_USAGE) from None
        return cls(f"{parts.scheme}://{parts.netloc}{prefix}", dataset)

    @property
    def url(self) -> str:
        return f"{self.base_url}/{self.name}"

    def ws_url(self, flow: str) -> str:
        """The WebSocket endpoint of ``flow`` (pull or push)."""
        scheme = "wss" if self.base_url.startswith("https") else "ws"
        return f"{scheme}{self.base_url[self.base_url.index(':') :]}/{self.name}/{flow}"
