"""Multipart uploads of a push, decided once for every store: what a large object's parts are and the
ETag they promise, which upload a resumed push continues (the server lists the parts a store holds,
so a push killed mid-object sends only the parts still missing), and the completion, checked part by
part before the verified commit (``sync.commit``) checks the assembled object's size and ETag."""

from __future__ import annotations

import contextlib

from msgspec import Struct

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.protocol.messages import ObjectFile
from smart_transfer.storage import MultipartRefused, NoSuchUpload, ObjectStore, UploadedPart
from smart_transfer.storage.base import stored_as_promised
from smart_transfer.storage.digest import md5_hex_from_base64, multipart_etag
from smart_transfer.storage.parts import Part, layout, part_size_for


class PartsPromise(Struct, frozen=True):
    """A large object's parts as the client promised them: the layout and each part's MD5 (hex)."""

    parts: list[Part]
    md5s: list[str]

    @property
    def size(self) -> int:
        """The size of the assembled object."""
        return sum(part.length for part in self.parts)

    @property
    def etag(self) -> str:
        """The ETag the assembled object must have."""
        return multipart_etag(self.md5s)

    def holds(self, part: UploadedPart) -> bool:
        """Whether a part the store holds is the promised one (number, size and MD5; the size alone when
        the store's tag is opaque: its PUT was bound to the promised MD5, and the commit confirms the
        assembled object's bytes)."""
        if not 1 <= part.number <= len(self.parts):
            return False
        return stored_as_promised(part, self.parts[part.number - 1].length, self.md5s[part.number - 1])

    def held_by(self, store: ObjectStore, key: str, upload_id: str) -> dict[int, str]:
        """The promised parts that upload ``upload_id`` of ``key`` holds in the store: number -> the
        store's ETag of it (what a completion quotes); NoSuchUpload when the store has no such upload
        (any more)."""
        return {part.number: part.etag for part in store.list_parts(key, upload_id) if self.holds(part)}


def promise_of(item: ObjectFile, threshold: int, part_size: int) -> PartsPromise | None:
    """The parts promise of an object to upload, None when it goes in one PUT (then its ``md5`` is
    required). BadMessage when the object does not carry what its size calls for."""
    if item.size <= threshold:
        if item.md5 is None or item.part_md5s is not None:
            raise ProtocolError(
                ErrorCode.BAD_MESSAGE, f"object {item.physical_hash} ({item.size} bytes) needs its md5 and no parts"
            )
        return None
    parts = layout(item.size, part_size_for(item.size, part_size))
    if item.part_md5s is None or len(item.part_md5s) != len(parts):
        raise ProtocolError(
            ErrorCode.BAD_MESSAGE,
            f"object {item.physical_hash} ({item.size} bytes) is uploaded in {len(parts)} parts: "
            f"give their {len(parts)} MD5s (part_md5s)",
        )
    return PartsPromise(parts, [md5_hex_from_base64(md5) for md5 in item.part_md5s])


def resume_or_start(store: ObjectStore, key: str, promise: PartsPromise, known: str | None) -> tuple[str, list[Part]]:
    """The upload of ``key`` to continue (``known``, else the one in progress holding the most promised
    parts) or a new one, and the parts it still lacks."""
    candidates = [known] if known is not None else [u.upload_id for u in store.list_multipart(key) if u.key == key]
    held: dict[str, dict[int, str]] = {}
    for upload_id in candidates:
        with contextlib.suppress(NoSuchUpload):  # aborted or completed meanwhile: not one to continue
            held[upload_id] = promise.held_by(store, key, upload_id)
    # the first of those holding the most promised parts
    best = max(held, key=lambda upload_id: len(held[upload_id]), default=None)
    if best is None:
        return store.create_multipart(key), list(promise.parts)
    return best, [part for part in promise.parts if part.number not in held[best]]


def complete(store: ObjectStore, key: str, upload_id: str, promise: PartsPromise) -> str | None:
    """Assemble the object once every promised part is in the store; else what is wrong (the upload is
    kept, so that a re-run sends only what is missing)."""
    try:
        held = promise.held_by(store, key, upload_id)
    except NoSuchUpload:
        info = store.head(key)  # assembled meanwhile by another push of the same object?
        return None if stored_as_promised(info, promise.size, promise.etag) else "its upload is gone (aborted?)"
    missing = [part.number for part in promise.parts if part.number not in held]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        return f"{len(missing)} of {len(promise.parts)} parts not uploaded (parts {shown})"
    try:
        # the store's own tags: the MD5s, except where encryption makes them opaque
        store.complete_multipart(key, upload_id, [(part.number, held[part.number]) for part in promise.parts])
    except MultipartRefused as exc:
        return str(exc)
    return None
