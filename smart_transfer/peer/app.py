"""The peer's HTTP surface (aiohttp: already the client's HTTP stack, and it starts in a fraction of
the time FastAPI and uvicorn take to import, for a server of three routes):

- ``GET /healthz``: ``{"status": "ok", ...}`` with what it served so far;
- ``GET /{dataset}``: 200 when the workspace has that dataset's objects (the clients' connectivity check);
- ``GET|HEAD /{dataset}/{kind}/{hash}``: the object's bytes, if the workspace holds it.

Read-only, no listing: a client must know an object's hash (from the dataset's blocks, which only
readers get from the server) to fetch it. Objects in a workspace were verified before they were
renamed into place; clients verify them again anyway. Errors are the project's typed bodies
(``{"error": {"code", "message", "details"}}``): 404 ObjectNotFound or DatasetNotFound, 400 for a bad
name or hash, 429 Busy with Retry-After when ``max_transfers`` objects are already being sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from smart_transfer.model import DatasetName, InvalidDatasetName, ModelError, Multihash, ObjectKind
from smart_transfer.peer.settings import PEER_CHUNK_BYTES, PeerSettings
from smart_transfer.protocol.codes import HTTP_STATUS, ErrorCode
from smart_transfer.repo.layout import object_key
from smart_transfer.storage.base import check_key
from smart_transfer.transfer.ratelimit import RateLimiter


@dataclass
class PeerStats:
    """What the peer did since it started (``GET /healthz``)."""

    objects_served: int = 0
    bytes_served: int = 0
    busy_answers: int = 0
    active: int = 0


def _error(code: ErrorCode, message: str, details: dict[str, Any] | None = None, **headers: str) -> web.Response:
    body = orjson.dumps({"error": {"code": code.value, "message": message, "details": details or {}}})
    return web.Response(body=body, status=HTTP_STATUS[code], content_type="application/json", headers=headers or None)


class PeerApp:
    """The routes of one peer over one workspace store."""

    def __init__(self, settings: PeerSettings) -> None:
        self.settings = settings
        self.store = settings.workspace / "store"
        self.stats = PeerStats()
        self.limiter = RateLimiter(settings.limit_rate) if settings.limit_rate else None

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self.health)
        app.router.add_get("/{dataset}", self.dataset)
        app.router.add_get("/{dataset}/{kind}/{hash}", self.object)  # HEAD too
        return app

    async def health(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", **self.stats.__dict__}, dumps=lambda v: orjson.dumps(v).decode())

    async def dataset(self, request: web.Request) -> web.Response:
        try:
            name = DatasetName(request.match_info["dataset"])
        except InvalidDatasetName as exc:
            return _error(ErrorCode.INVALID_DATASET_NAME, str(exc))
        if not (self.store / name).is_dir():
            return _error(ErrorCode.DATASET_NOT_FOUND, f"this peer holds no objects of {name}")
        return web.json_response({"dataset": str(name)})

    def _path(self, request: web.Request) -> Path | web.Response:
        """The file of the requested object, or the error answer."""
        info = request.match_info
        try:
            name = DatasetName(info["dataset"])
            kind = ObjectKind(info["kind"])
            wanted = Multihash.parse(info["hash"])
        except InvalidDatasetName as exc:
            return _error(ErrorCode.INVALID_DATASET_NAME, str(exc))
        except (ValueError, ModelError) as exc:
            return _error(ErrorCode.INVALID_HASH, f"not an object address: {exc}")
        path = self.store / check_key(object_key(name, kind, wanted))
        if not path.is_file():
            return _error(ErrorCode.OBJECT_NOT_FOUND, f"this peer does not hold {kind.value}/{wanted}")
        return path

    async def object(self, request: web.Request) -> web.StreamResponse:
        found = self._path(request)
        if isinstance(found, web.Response):
            return found
        if request.method == "HEAD":
            return web.Response(headers={"Content-Length": str(found.stat().st_size)})
        if self.stats.active >= self.settings.max_transfers:
            self.stats.busy_answers += 1
            retry = self.settings.retry_after
            message = f"peer busy: {self.stats.active} transfers in progress (limit {self.settings.max_transfers})"
            return _error(ErrorCode.BUSY, message, {"retry_after": retry}, **{"Retry-After": str(retry)})
        self.stats.active += 1
        try:
            response = await self._send(request, found)
        finally:
            self.stats.active -= 1
        return response

    async def _send(self, request: web.Request, path: Path) -> web.StreamResponse:
        """Send the whole file while holding a transfer slot (a FileResponse would be sent after the
        handler returned, outside the slot)."""
        headers = {"ETag": f'"{request.match_info["hash"]}"', "Content-Type": "application/octet-stream"}
        response = web.StreamResponse(headers=headers)
        with open(path, "rb") as source:
            size = os.fstat(source.fileno()).st_size
            response.content_length = size
            await response.prepare(request)
            while chunk := source.read(PEER_CHUNK_BYTES):
                if self.limiter is not None:
                    await self.limiter.acquire(len(chunk))
                await response.write(chunk)
        await response.write_eof()
        self.stats.objects_served += 1
        self.stats.bytes_served += size
        return response
