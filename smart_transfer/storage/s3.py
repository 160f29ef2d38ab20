"""S3Store: any S3 endpoint (AWS, MinIO, Ceph RGW, R2) through boto3, SigV4, path-style.

References moved by compare-and-swap are kept as write-once *generation records*
(``{key}.gen/{inverted generation}``, the value as body) created with ``If-None-Match: *``: only one
writer can create generation n+1, and the newest record is the first key a LIST returns. The key
must name the generation alone: were the value part of it, racing writers would all succeed. This needs no
``If-Match`` on PUT (Ceph 16 refuses every such PUT) and no lock that a crash could leave behind.
A plain copy of the value is also written to ``{key}`` for people and tools browsing the bucket.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import boto3
import urllib3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, ReadTimeoutError

from smart_transfer.storage.base import (
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_URL_TTL_SECONDS,
    MAX_URL_TTL_SECONDS,
    ObjectInfo,
    ObjectStore,
    PendingUpload,
    PresignedRequest,
    StoreObserver,
    UploadedPart,
    check_key,
    check_prefix,
)
from smart_transfer.storage.errors import (
    MultipartRefused,
    NoSuchUpload,
    ObjectNotFound,
    StorageError,
    StorageUnavailable,
)
from smart_transfer.storage.lru import BytesLru
from smart_transfer.storage.parts import DEFAULT_MULTIPART_THRESHOLD, DEFAULT_PART_SIZE, part_size_for
from smart_transfer.storage.s3_defaults import DEFAULT_S3_ATTEMPTS, DEFAULT_S3_CONNECT_TIMEOUT, DEFAULT_S3_READ_TIMEOUT
from smart_transfer.storage.sigv4 import Credentials, QueryPresigner

#: How a store observer is told of the one-key listing that finds a reference's newest record.
REF_LISTING = "ListObjectsV2.ref"
#: Generation numbers are written inverted so the newest sorts first.
_GENERATION_BASE = 10**19 - 1
#: A generation record as a LIST names it: key, ETag, size, last-modified.
_Record = tuple[str, str, int, str]
#: References are small objects (a hash); larger values are refused.
MAX_REF_BYTES = 1024
#: Bytes of generation records kept in memory (4096 at least: MAX_REF_BYTES each). A record is written
#: once and never changed, so a reference read whose LIST names a record already read needs no GET (under
#: load a server reads the same few heads hundreds of times a second; a table listing reads every head).
RECORD_CACHE_BYTES = 4096 * MAX_REF_BYTES
#: S3's answers to a CompleteMultipartUpload whose parts are not what it was told.
_ASSEMBLY_REFUSALS = ("InvalidPart", "InvalidPartOrder", "EntityTooSmall", "BadDigest")
#: Server-side encryption S3 applies to what it stores: SSE-S3 (its own keys) or SSE-KMS (a KMS key).
SSE_MODES = ("AES256", "aws:kms")
#: Encryption under which S3's ETag is not the MD5 of the bytes (AWS: SSE-KMS, DSSE-KMS; SSE-C is
#: seen by its customer-algorithm header).
_OPAQUE_SSE = ("aws:kms", "aws:kms:dsse")


def _encryption(sse: str | None, kms_key_id: str | None) -> tuple[dict[str, str], dict[str, str]]:
    """What each write asks boto3 for, and the same as the signed headers of a presigned PUT."""
    if sse is not None and sse not in SSE_MODES:
        raise ValueError(f"server-side encryption must be one of {', '.join(SSE_MODES)}, not {sse!r}")
    if kms_key_id is not None and sse != "aws:kms":
        raise ValueError("a KMS key id needs server-side encryption aws:kms")
    params: dict[str, str] = {}
    headers: dict[str, str] = {}
    if sse is not None:
        params["ServerSideEncryption"] = headers["x-amz-server-side-encryption"] = sse
    if kms_key_id is not None:
        params["SSEKMSKeyId"] = headers["x-amz-server-side-encryption-aws-kms-key-id"] = kms_key_id
    return params, headers


def opaque_etag(answer: dict[str, Any]) -> bool:
    """Whether a HEAD (or PUT) answer's ETag may not be the MD5 of the bytes, by the encryption it reports."""
    return answer.get("ServerSideEncryption") in _OPAQUE_SSE or bool(answer.get("SSECustomerAlgorithm"))


def _status(exc: ClientError) -> int:
    return int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _unavailable(where: str, exc: Exception, read_timeout: float, attempts: int) -> StorageUnavailable:
    """A failed call as the contract's error, saying whether S3 stalled or could not be reached."""
    if isinstance(exc, ReadTimeoutError | urllib3.exceptions.ReadTimeoutError):
        return StorageUnavailable(
            f"storage stopped answering: S3 at {where} sent nothing for {read_timeout:g} s on {attempts} attempt(s)"
        )
    return StorageUnavailable(f"storage unreachable: S3 at {where}: {exc}")


class S3Store(ObjectStore):
    """Objects in one bucket under an optional prefix."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        public_endpoint_url: str | None = None,
        region: str | None = None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        connect_timeout: float = DEFAULT_S3_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_S3_READ_TIMEOUT,
        attempts: int = DEFAULT_S3_ATTEMPTS,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
        part_size: int = DEFAULT_PART_SIZE,
        sse: str | None = None,
        sse_kms_key_id: str | None = None,
        checksum_sha256: bool = False,
    ) -> None:
        """Every call is bounded: ``connect_timeout`` to connect, ``read_timeout`` without a byte,
        ``attempts`` tries (standard retry mode: backoff with jitter). ``put_file`` uploads files
        larger than ``multipart_threshold`` in parts of ``part_size`` (S3 refuses single PUTs over
        5 GiB). ``sse``, ``sse_kms_key_id``, ``checksum_sha256``: see :meth:`_protect_writes`."""
        self.bucket = bucket
        self._protect_writes(sse, sse_kms_key_id, checksum_sha256)
        self.multipart_threshold, self.part_size = multipart_threshold, part_size
        self.prefix = check_prefix(prefix.strip("/") + "/") if prefix.strip("/") else ""
        self.endpoint_url = endpoint_url
        self.read_timeout, self.attempts = read_timeout, attempts
        self.max_connections = max_connections
        config = Config(
            signature_version="s3v4",  # boto3 would presign SigV2 for a custom endpoint otherwise
            s3={"addressing_style": "path"},
            max_pool_connections=max_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"max_attempts": attempts, "mode": "standard"},
        )
        session = boto3.session.Session()
        region_name = region or session.region_name or "us-east-1"
        self._client: Any = session.client("s3", endpoint_url=endpoint_url, region_name=region_name, config=config)
        # A signature covers the host, so URLs for clients are signed for the host *they* use
        # (e.g. a public name in front of an internal endpoint).
        self.public_endpoint_url = public_endpoint_url or endpoint_url
        self._presigner: Any = (
            session.client("s3", endpoint_url=public_endpoint_url, region_name=region_name, config=config)
            if public_endpoint_url and public_endpoint_url != endpoint_url
            else self._client
        )
        # the fast presigner (same URLs as botocore, ~20x faster) wherever the endpoint is explicit
        self._credentials: Any = session.get_credentials()
        self._fast: QueryPresigner | None = (
            QueryPresigner(self.public_endpoint_url, bucket, region_name)
            if self.public_endpoint_url and self._credentials is not None
            else None
        )
        self._observer: StoreObserver | None = None
        self._session, self._region = session, region_name
        self._records = BytesLru[_Record](RECORD_CACHE_BYTES)  # records read, by listing (``_read_record``)
        self._probe: Any = None
        self._probe_timeout = 0.0

    def _protect_writes(self, sse: str | None, kms_key_id: str | None, checksum_sha256: bool) -> None:
        """``sse`` (one of SSE_MODES, with ``kms_key_id`` for a KMS key other than the account's
        default) is asked for on every write, the server's own and every presigned PUT (a bucket policy
        may deny writes without it); ``checksum_sha256`` binds a body's SHA-256 into the presigned PUTs
        that are given one, and asks HEADs for the checksum the store kept."""
        self.sse = sse
        self.checksum_sha256 = checksum_sha256
        self._sse_params, self._sse_headers = _encryption(sse, kms_key_id)
        #: listings and listed parts report no encryption: what this store writes decides it
        self._listed_opaque = sse in _OPAQUE_SSE

    def check_ready(self, timeout: float) -> None:
        """One HEAD of the bucket, bounded by ``timeout`` and never retried (a readiness probe)."""
        if self._probe is None or self._probe_timeout != timeout:
            config = Config(
                signature_version="s3v4",
                s3={"addressing_style": "path"},
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": 1, "mode": "standard"},
            )
            self._probe = self._session.client(
                "s3", endpoint_url=self.endpoint_url, region_name=self._region, config=config
            )
            self._probe_timeout = timeout
        try:
            self._probe.head_bucket(Bucket=self.bucket)
        except ClientError as exc:
            raise StorageUnavailable(
                f"S3 refused a HEAD of bucket {self.bucket}: {_code(exc) or _status(exc)}"
            ) from None
        except BotoCoreError as exc:
            raise _unavailable(self.endpoint_url or "AWS", exc, timeout, 1) from None

    def observe(self, observer: StoreObserver) -> None:
        """Report every S3 call (retries included) with its duration: botocore's call events."""
        self._observer = observer
        events = self._client.meta.events
        events.register("before-call.s3", self._call_started)
        events.register("after-call.s3", self._call_ended)
        events.register("after-call-error.s3", self._call_ended)

    @staticmethod
    def _call_started(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        name = model.name
        if name == "ListObjectsV2" and str(params.get("query_string", {}).get("prefix", "")).endswith(".gen/"):
            name = REF_LISTING  # a reference's newest record (one key), not a listing of objects
        context["smart_transfer_call"] = (name, time.perf_counter())

    def _call_ended(self, context: dict[str, Any], exception: Exception | None = None, **_: Any) -> None:
        started = context.pop("smart_transfer_call", None)
        if started is not None and self._observer is not None:
            name, at = started
            self._observer(name, time.perf_counter() - at, exception is None)

    def describe(self) -> str:
        where = self.endpoint_url or "AWS S3"
        return f"s3://{self.bucket}/{self.prefix} at {where}"

    def _full(self, key: str) -> str:
        return self.prefix + check_key(key)

    @contextmanager
    def _errors(self, key: str) -> Iterator[None]:
        """Translate boto3's exceptions into the contract's typed errors."""
        try:
            yield
        except ClientError as exc:
            if _status(exc) == 404 or _code(exc) in ("NoSuchKey", "404", "NotFound"):
                raise ObjectNotFound(key) from None
            raise StorageUnavailable(f"S3 refused an operation on {key}: {_code(exc) or _status(exc)}") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc) from None

    def _unavailable(self, exc: Exception) -> StorageUnavailable:
        return _unavailable(self.endpoint_url or "AWS", exc, self.read_timeout, self.attempts)

    # -- the contract ----------------------------------------------------------------------------

    def put(self, key: str, data: bytes) -> ObjectInfo:
        with self._errors(key):
            response = self._client.put_object(Bucket=self.bucket, Key=self._full(key), Body=data, **self._sse_params)
        return ObjectInfo(key, len(data), str(response["ETag"]).strip('"'), opaque_etag=opaque_etag(response))

    def put_file(self, key: str, path: Path) -> ObjectInfo:
        size = path.stat().st_size
        if size > self.multipart_threshold:
            return self._put_file_in_parts(key, path, size)
        with self._errors(key), open(path, "rb") as body:
            response = self._client.put_object(Bucket=self.bucket, Key=self._full(key), Body=body, **self._sse_params)
        return ObjectInfo(key, size, str(response["ETag"]).strip('"'), opaque_etag=opaque_etag(response))

    def _put_file_in_parts(self, key: str, path: Path, size: int) -> ObjectInfo:
        """boto3's managed transfer: parallel parts streamed from the file, retried, then completed
        (or aborted on failure); the ETag is the parts' (see ``multipart_etag``)."""
        # boto3's managed transfer loads only for a file large enough for parts
        from boto3.s3.transfer import TransferConfig

        part_size = part_size_for(size, self.part_size)
        config = TransferConfig(
            multipart_threshold=self.multipart_threshold, multipart_chunksize=part_size, max_concurrency=4
        )
        with self._errors(key):
            self._client.upload_file(
                str(path), self.bucket, self._full(key), ExtraArgs=self._sse_params or None, Config=config
            )
        info = self.head(key)
        if info is None or info.size != size:
            raise StorageUnavailable(f"S3 did not keep the {size} bytes uploaded to {key}")
        return info

    def get(self, key: str) -> bytes:
        with self._errors(key):
            body: bytes = self._client.get_object(Bucket=self.bucket, Key=self._full(key))["Body"].read()
        return body

    def stream(self, key: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        extra: dict[str, str] = {}
        if start or end is not None:
            extra["Range"] = f"bytes={start}-{'' if end is None else end}"
        with self._errors(key):
            body = self._client.get_object(Bucket=self.bucket, Key=self._full(key), **extra)["Body"]

        def chunks() -> Iterator[bytes]:
            with self._errors(key):
                yield from body.iter_chunks(1024 * 1024)

        return chunks()

    def head(self, key: str) -> ObjectInfo | None:
        # with checksums bound, S3 answers the SHA-256 it checked on arrival only when asked for it
        extra = {"ChecksumMode": "ENABLED"} if self.checksum_sha256 else {}
        try:
            with self._errors(key):
                response = self._client.head_object(Bucket=self.bucket, Key=self._full(key), **extra)
        except ObjectNotFound:
            return None
        return ObjectInfo(
            key,
            int(response["ContentLength"]),
            str(response["ETag"]).strip('"'),
            opaque_etag=opaque_etag(response),
            checksum_sha256=str(response.get("ChecksumSHA256") or ""),
        )

    def head_many(self, keys: Sequence[str]) -> dict[str, ObjectInfo | None]:
        """HEADs in parallel on the client's connection pool (the first failure is raised)."""
        if len(keys) <= 1:
            return {key: self.head(key) for key in keys}
        with ThreadPoolExecutor(max_workers=min(len(keys), self.max_connections)) as pool:
            return dict(zip(keys, pool.map(self.head, keys), strict=True))

    def delete(self, key: str) -> None:
        with self._errors(key):
            self._client.delete_object(Bucket=self.bucket, Key=self._full(key))

    def _listed(self, operation: str, prefix: str, entries: str) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each entry (key without the store's prefix, and the entry) of the pages of a listing
        ``operation`` (``list_objects_v2``, ``list_multipart_uploads``) of the keys under ``prefix``."""
        check_prefix(prefix)
        paginator = self._client.get_paginator(operation)
        with self._errors(prefix):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self.prefix + prefix):
                for item in page.get(entries, []):
                    yield str(item["Key"])[len(self.prefix) :], item

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for key, item in self._listed("list_objects_v2", prefix, "Contents"):
            modified = item.get("LastModified")
            yield ObjectInfo(
                key,
                int(item["Size"]),
                str(item["ETag"]).strip('"'),
                modified.timestamp() if modified else 0.0,
                opaque_etag=self._listed_opaque,
            )

    def list_children(self, prefix: str, start_after: str | None = None) -> Iterator[str]:
        check_prefix(prefix)
        paginator = self._client.get_paginator("list_objects_v2")
        full = self.prefix + prefix
        # "0" follows "/": every key under "part/" sorts before "part0", and every later part after it
        since = {} if start_after is None else {"StartAfter": full + start_after + "0"}
        with self._errors(prefix):
            for page in paginator.paginate(Bucket=self.bucket, Prefix=full, Delimiter="/", **since):
                for item in page.get("CommonPrefixes", []):
                    yield str(item["Prefix"])[len(full) :].rstrip("/")
                for item in page.get("Contents", []):
                    yield str(item["Key"])[len(full) :]

    def create_if_absent(self, key: str, data: bytes) -> bool:
        return self._create(self._full(key), data)

    def _create(self, full_key: str, data: bytes) -> bool:
        try:
            self._client.put_object(Bucket=self.bucket, Key=full_key, Body=data, IfNoneMatch="*", **self._sse_params)
        except ClientError as exc:
            if _status(exc) in (409, 412) or _code(exc) in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise StorageUnavailable(f"S3 refused a write to {full_key}: {_code(exc) or _status(exc)}") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc) from None
        return True

    def _newest_generation(self, key: str) -> tuple[int, _Record | None]:
        """The newest generation number of a reference and its record as listed."""
        with self._errors(key):
            response = self._client.list_objects_v2(Bucket=self.bucket, Prefix=self._full(key) + ".gen/", MaxKeys=1)
        contents = response.get("Contents", [])
        if not contents:
            return 0, None
        item = contents[0]
        record = str(item["Key"])
        listed = (record, str(item.get("ETag", "")), int(item.get("Size", -1)), str(item.get("LastModified", "")))
        return _GENERATION_BASE - int(record.rsplit("/", 1)[1]), listed

    def _generation_key(self, key: str, generation: int) -> str:
        return f"{self._full(key)}.gen/{_GENERATION_BASE - generation:019d}"

    def _read_record(self, key: str, record: _Record | None) -> bytes | None:
        """The value of a listed generation record: from memory when this very record (key, ETag, size and
        time as listed: a dataset deleted and made again writes its first generation's key anew) was read
        before, else by a GET."""
        if record is None:
            return None
        value = self._records.get(record)
        if value is None:
            with self._errors(key):
                value = bytes(self._client.get_object(Bucket=self.bucket, Key=record[0])["Body"].read())
            self._records.put(record, value)
        return value

    def read_ref(self, key: str) -> bytes | None:
        return self._read_record(key, self._newest_generation(key)[1])

    def compare_and_swap(self, key: str, expected: bytes | None, new: bytes) -> bool:
        if len(new) > MAX_REF_BYTES:
            raise ValueError(f"reference values are limited to {MAX_REF_BYTES} bytes")
        generation, record = self._newest_generation(key)
        if self._read_record(key, record) != expected:
            return False
        if not self._create(self._generation_key(key, generation + 1), new):
            return False
        # Old records are never deleted here: a writer slow enough to still hold an old generation
        # could re-create a deleted one and wrongly believe it won. They are tiny; gc may prune them
        # after a grace period. The plain copy is best effort: readers only use the records.
        with suppress(StorageError):
            self.put(key, new)
        return True

    # -- presigning --------------------------------------------------------------------------------

    def _presign(
        self,
        operation: str,
        key: str,
        ttl_seconds: int,
        params: dict[str, str],
        query: Sequence[tuple[str, str]] = (),
        headers: dict[str, str] | None = None,
    ) -> str:
        """``query``: the operation's own URL parameters, for the fast presigner (``uploadId``,
        ``partNumber``); botocore takes them as ``UploadId`` and ``PartNumber``. ``params``: botocore's
        names of the signed headers (``ContentMD5``, ``ServerSideEncryption``, ...), ``headers`` the
        same by their HTTP names (the fast presigner's, beside ``ContentMD5``)."""
        if not 1 <= ttl_seconds <= MAX_URL_TTL_SECONDS:
            raise ValueError(f"URL lifetime must be 1..{MAX_URL_TTL_SECONDS} seconds")
        if self._fast is not None:
            frozen = self._credentials.get_frozen_credentials()
            return self._fast.presign(
                "GET" if operation == "get_object" else "PUT",
                self._full(key),
                ttl_seconds,
                Credentials(frozen.access_key, frozen.secret_key, frozen.token),
                params.get("ContentMD5"),
                query=query,
                headers=headers,
            )
        named = {name[0].upper() + name[1:]: int(value) if name == "partNumber" else value for name, value in query}
        with self._errors(key):
            url: str = self._presigner.generate_presigned_url(
                operation,
                Params={"Bucket": self.bucket, "Key": self._full(key), **params, **named},
                ExpiresIn=ttl_seconds,
            )
        return url

    def presign_get(self, key: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS) -> PresignedRequest:
        expires = int(time.time()) + ttl_seconds
        return PresignedRequest("GET", self._presign("get_object", key, ttl_seconds, {}), expires)

    def presign_put(
        self,
        key: str,
        ttl_seconds: int = DEFAULT_URL_TTL_SECONDS,
        content_md5: str | None = None,
        checksum_sha256: str | None = None,
    ) -> PresignedRequest:
        expires = int(time.time()) + ttl_seconds
        params = {"ContentMD5": content_md5} if content_md5 else {}
        params.update(self._sse_params)
        signed = dict(self._sse_headers)
        if checksum_sha256 and self.checksum_sha256:
            params["ChecksumSHA256"] = checksum_sha256
            signed["x-amz-checksum-sha256"] = checksum_sha256
        url = self._presign("put_object", key, ttl_seconds, params, headers=signed)
        headers = {"Content-MD5": content_md5, **signed} if content_md5 else signed
        return PresignedRequest("PUT", url, expires, headers)

    # -- multipart uploads ---------------------------------------------------------------------

    @contextmanager
    def _upload_errors(self, key: str, upload_id: str) -> Iterator[None]:
        """S3's answers about an upload as the contract's errors: an unknown upload, a refused assembly."""
        try:
            yield
        except ClientError as exc:
            code = _code(exc)
            if code == "NoSuchUpload" or _status(exc) == 404:
                raise NoSuchUpload(key, upload_id) from None
            if code in _ASSEMBLY_REFUSALS:
                raise MultipartRefused(f"S3 refused to assemble {key}: {code}") from None
            raise StorageUnavailable(f"S3 refused an operation on {key}: {code or _status(exc)}") from None
        except BotoCoreError as exc:
            raise self._unavailable(exc) from None

    def create_multipart(self, key: str) -> str:
        # the upload's encryption is chosen here: S3 refuses encryption headers on its parts' PUTs
        with self._errors(key):
            response = self._client.create_multipart_upload(Bucket=self.bucket, Key=self._full(key), **self._sse_params)
        return str(response["UploadId"])

    def list_multipart(self, prefix: str) -> Iterator[PendingUpload]:
        for key, item in self._listed("list_multipart_uploads", prefix, "Uploads"):
            yield PendingUpload(key, str(item["UploadId"]), item["Initiated"].timestamp())

    def list_parts(self, key: str, upload_id: str) -> Sequence[UploadedPart]:
        paginator = self._client.get_paginator("list_parts")
        parts = []
        with self._upload_errors(key, upload_id):
            for page in paginator.paginate(Bucket=self.bucket, Key=self._full(key), UploadId=upload_id):
                for item in page.get("Parts", []):
                    parts.append(
                        UploadedPart(
                            int(item["PartNumber"]),
                            int(item["Size"]),
                            str(item["ETag"]).strip('"'),
                            self._listed_opaque,
                        )
                    )
        return sorted(parts, key=lambda part: part.number)

    def presign_upload_part(
        self, key: str, upload_id: str, number: int, content_md5: str, ttl_seconds: int = DEFAULT_URL_TTL_SECONDS
    ) -> PresignedRequest:
        expires = int(time.time()) + ttl_seconds
        query = (("uploadId", upload_id), ("partNumber", str(number)))
        url = self._presign("upload_part", key, ttl_seconds, {"ContentMD5": content_md5}, query)
        return PresignedRequest("PUT", url, expires, {"Content-MD5": content_md5})

    def complete_multipart(self, key: str, upload_id: str, parts: Sequence[tuple[int, str]]) -> ObjectInfo:
        listed = {"Parts": [{"PartNumber": number, "ETag": f'"{etag}"'} for number, etag in parts]}
        try:
            with self._upload_errors(key, upload_id):
                self._client.complete_multipart_upload(
                    Bucket=self.bucket, Key=self._full(key), UploadId=upload_id, MultipartUpload=listed
                )
        except StorageUnavailable:
            self.list_parts(key, upload_id)  # Ceph answers 500, not NoSuchUpload, for an aborted upload
            raise
        info = self.head(key)
        if info is None:
            raise StorageUnavailable(f"S3 completed {key} but does not show it")
        return info

    def abort_multipart(self, key: str, upload_id: str) -> None:
        try:
            with self._upload_errors(key, upload_id):
                self._client.abort_multipart_upload(Bucket=self.bucket, Key=self._full(key), UploadId=upload_id)
        except NoSuchUpload:
            return

    def close(self) -> None:
        self._client.close()
