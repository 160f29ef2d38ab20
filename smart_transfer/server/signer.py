"""The one signer: every presigned URL the server hands out for an object of a dataset (pull pages, push
uploads and their parts, REST redirects, Delta Sharing files) is made here, checked against one rule and
counted once in ``smart_transfer_urls_signed_total``.

The rule, *URLs follow commitment*: a GET URL only for an object the index holds committed in the
dataset (with the size asked for: on a miss the head is synced once, as another replica may have
committed since), so no URL ever reads an arbitrary key or an upload in flight; a PUT URL only for an
object not committed yet, so nothing committed is ever written again (a push gets SkipUpload for it).
Which uploads a push may ask for at all (the objects its blocks reference) is the push flow's check."""

from __future__ import annotations

import base64

from smart_transfer.model import Multihash, ObjectKind, ObjectRef
from smart_transfer.model.multihash import SHA2_256
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ObjectDetails, ProtocolError
from smart_transfer.repo.dataset import DatasetRepository
from smart_transfer.server.metrics import Metrics
from smart_transfer.storage import PresignedRequest


def committed_size(dataset: DatasetRepository, kind: ObjectKind, wanted: Multihash) -> int:
    """The size of a committed object of ``dataset`` (ObjectNotFound when the index, synced to the
    stored head once on a miss, does not hold it; DatasetNotFound when the dataset has no head)."""
    size = dataset.committed(kind, wanted, resync=True)  # another server may have committed it since
    if size is None:
        raise ProtocolError(ErrorCode.OBJECT_NOT_FOUND, f"no committed {kind.value} object {wanted} in {dataset.name}")
    return size


class Signer:
    """Presigns object URLs under the rule above and counts each one by method."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def get(self, dataset: DatasetRepository, ref: ObjectRef, ttl: int) -> PresignedRequest:
        """A GET of a committed object (ObjectNotFound otherwise, or when committed with another size)."""
        if committed_size(dataset, ref.kind, ref.physical_hash) != ref.size:
            raise ProtocolError(
                ErrorCode.OBJECT_NOT_FOUND,
                f"no committed {ref.label} of {ref.size} bytes in {dataset.name}",
            )
        signed = dataset.store.presign_get(dataset.object_key(ref), ttl)
        self._count("GET")
        return signed

    def put(self, dataset: DatasetRepository, ref: ObjectRef, ttl: int, content_md5: str | None) -> PresignedRequest:
        """A PUT of an object not committed yet, binding its MD5 when given, and its SHA-256 (the object's
        own hash, when it is one) where the store binds checksums."""
        self._uncommitted(dataset, ref)
        sha256 = base64.b64encode(ref.physical_hash.digest).decode() if ref.physical_hash.code == SHA2_256 else None
        signed = dataset.store.presign_put(
            dataset.object_key(ref), ttl, content_md5=content_md5, checksum_sha256=sha256
        )
        self._count("PUT")
        return signed

    def put_part(
        self, dataset: DatasetRepository, ref: ObjectRef, upload: tuple[str, int], md5: str, ttl: int
    ) -> PresignedRequest:
        """A PUT of part ``upload[1]`` of multipart upload ``upload[0]`` of an object not committed yet."""
        self._uncommitted(dataset, ref)
        upload_id, number = upload
        signed = dataset.store.presign_upload_part(dataset.object_key(ref), upload_id, number, md5, ttl)
        self._count("PUT")
        return signed

    def _count(self, method: str) -> None:
        """Count the URL."""
        self.metrics.urls_signed.labels(method).inc()

    @staticmethod
    def _uncommitted(dataset: DatasetRepository, ref: ObjectRef) -> None:
        # at any size: the key holds no size, so a PUT "of another size" would overwrite the committed bytes
        if dataset.committed(ref.kind, ref.physical_hash) is not None:
            raise ProtocolError(
                ErrorCode.OBJECT_NOT_ALLOWED,
                f"{ref.label} is committed in {dataset.name}: it is never written again",
                ObjectDetails(object=str(ref.physical_hash)),
            )
