"""Remote dataset URLs, ``http(s)://HOST[:PORT][/PREFIX]/DATASET``: the one parser every command and
both protocols use. Bad URLs are refused here, before anything is sent; credentials in a URL are
refused too (tokens go in ``--token``) and never printed."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from msgspec import Struct

from smart_transfer.errors import InvalidUrl
from smart_transfer.model import DatasetName, InvalidDatasetName

#: A path segment of a server prefix (a reverse proxy's location): unreserved characters only.
_PREFIX_SEGMENT = re.compile(r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*")


def redact(url: str) -> str:
    """``url`` for messages: everything between ``://`` and the last ``@`` (where credentials would
    be, whatever characters they contain) replaced by ``***``."""
    scheme, separator, rest = url.partition("://")
    if not separator or "@" not in rest:
        return url
    return f"{scheme}://***@{rest.rpartition('@')[2]}"


#: What each kind of URL looks like, for the message that refuses one.
DATASET_URL = "dataset URL (http(s)://HOST[:PORT][/PREFIX]/DATASET)"
SERVER_URL = "server URL (http(s)://HOST[:PORT][/PREFIX])"
PEER_URL = "peer URL (http(s)://HOST:PORT, as `peer serve` prints it)"


def _split(url: str, kind: str) -> SplitResult:
    shown = redact(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parsing the port is what raises on a malformed one
    except ValueError:
        # the parser's own message may quote parts of the URL (a password): say only what is wrong
        raise InvalidUrl(f"not a valid URL: {shown!r} (malformed host or port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidUrl(f"not a {kind}: {shown!r}")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrl(f"{shown!r}: credentials do not belong in the URL; give a token with --token")
    if parts.query or parts.fragment:
        raise InvalidUrl(f"a {kind.split(' (', maxsplit=1)[0]} has no query or fragment: {shown!r}")
    return parts


def _base(url: str, parts: SplitResult, prefix: list[str], where: str) -> str:
    """``scheme://host[:port][/prefix]`` with every prefix segment checked."""
    for segment in prefix:
        if _PREFIX_SEGMENT.fullmatch(segment) is None or set(segment) == {"."}:
            raise InvalidUrl(f"{redact(url)!r}: invalid path segment {segment[:40]!r}{where}")
    return f"{parts.scheme}://{parts.netloc}" + "".join(f"/{s}" for s in prefix)


def is_url(text: str) -> bool:
    """Whether a command argument is meant as a URL (as opposed to a dataset name)."""
    return "://" in text


class RemoteServer(Struct, frozen=True):
    """A smart-transfer server: ``http(s)://HOST[:PORT][/PREFIX]``."""

    base_url: str  # no trailing slash

    @classmethod
    def parse(cls, url: str, kind: str = SERVER_URL) -> RemoteServer:
        """Parse and check a server URL (``kind`` names what the command expects, for the message);
        InvalidUrl (a usage error) when it cannot name one."""
        parts = _split(url, kind)
        prefix = [segment for segment in parts.path.split("/") if segment]
        return cls(_base(url, parts, prefix, ""))

    def dataset(self, name: str) -> RemoteDataset:
        """A dataset on this server (InvalidUrl for a name no dataset may have)."""
        try:
            return RemoteDataset(self.base_url, DatasetName(name))
        except InvalidDatasetName as exc:
            raise InvalidUrl(f"{self.base_url}: {exc}") from None


class RemoteDataset(Struct, frozen=True):
    """A dataset on a smart-transfer server."""

    base_url: str  # http(s)://host:port[/prefix], no trailing slash
    name: DatasetName

    @classmethod
    def parse(cls, url: str) -> RemoteDataset:
        """Parse and check ``url``; InvalidUrl (a usage error) when it cannot name a dataset."""
        parts = _split(url, DATASET_URL)
        *prefix, name = parts.path.rstrip("/").split("/")[1:] or [""]
        base = _base(url, parts, prefix, " before the dataset name")
        try:
            dataset = DatasetName(name)
        except InvalidDatasetName as exc:
            raise InvalidUrl(f"{redact(url)!r}: {exc}") from None
        return cls(base, dataset)

    @property
    def url(self) -> str:
        """The dataset's URL: ``{base_url}/{name}``."""
        return f"{self.base_url}/{self.name}"

    def ws_url(self, flow: str) -> str:
        """The WebSocket endpoint of ``flow`` (pull or push)."""
        scheme = "wss" if self.base_url.startswith("https") else "ws"
        return f"{scheme}{self.base_url[self.base_url.index(':') :]}/{self.name}/{flow}"

    def object_url(self, kind: str, object_hash: str) -> str:
        """The simple protocol's URL of an object."""
        return f"{self.url}/{kind}/{object_hash}"
