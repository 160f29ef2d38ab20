"""Compare the two object transports (libcurl, aiohttp) on mid-size objects and multipart parts against
a real S3 through presigned URLs, in one process: wall and CPU time of N PUTs then N GETs of 8 MiB
objects (the verified ``upload``/``download`` paths of a push and a pull), and of one object sent as
8 MiB parts, each repeated, the implementations interleaved. Not run by the tests.

    source /work/wt/s3-env.sh   # or any S3: AWS_ENDPOINT_URL, credentials, SMART_TRANSFER_TEST_S3_BUCKET
    python scripts/bench_transport.py [--counts 16 64] [--repeat 3] [--parallel 16]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import boto3

from smart_transfer.model import Multihash
from smart_transfer.protocol.messages import HttpRequest, MultipartUpload, UploadPart
from smart_transfer.transfer.choice import open_library
from smart_transfer.transfer.http import download, upload
from smart_transfer.transfer.limits import Timeouts
from smart_transfer.transfer.multipart import upload_parts
from smart_transfer.transfer.transport import LIBRARIES

OBJECT_BYTES = 8 * 1024 * 1024


def _request(s3: Any, bucket: str, method: str, key: str, **params: Any) -> HttpRequest:
    operation = {"PUT": "put_object", "GET": "get_object", "PART": "upload_part"}[method]
    url = s3.generate_presigned_url(operation, Params={"Bucket": bucket, "Key": key, **params}, ExpiresIn=3600)
    return HttpRequest(method="GET" if method == "GET" else "PUT", url=url, headers={}, expires_at=0)


async def _timed(work: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    await work()
    return time.perf_counter() - wall, time.process_time() - cpu


async def _objects(
    kind: str, s3: Any, bucket: str, source: Path, count: int, parallel: int
) -> dict[str, tuple[float, float]]:
    """N PUTs, then N verified GETs of the same objects, ``parallel`` at a time."""
    prefix = f"bench-transport/{uuid.uuid4().hex}"
    keys = [f"{prefix}/{n}" for n in range(count)]
    puts = [_request(s3, bucket, "PUT", key) for key in keys]
    gets = [_request(s3, bucket, "GET", key) for key in keys]
    expected = Multihash.of(source.read_bytes())
    slots = asyncio.Semaphore(parallel)
    timeouts = Timeouts()
    async with open_library(kind, parallel) as transport:

        async def put(request: HttpRequest) -> None:
            async with slots:
                await upload(transport, request, "bench", source, lambda _: None, timeouts, OBJECT_BYTES)

        async def get(request: HttpRequest, n: int) -> None:
            async with slots:
                target = source.with_name(f"got-{kind}-{n}")
                await download(transport, request, expected, OBJECT_BYTES, target, lambda _: None, timeouts)
                target.unlink()

        result = {
            "PUT": await _timed(lambda: _gather(put(r) for r in puts)),
            "GET": await _timed(lambda: _gather(get(r, n) for n, r in enumerate(gets))),
        }
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": key} for key in keys]})
    return result


async def _parts(kind: str, s3: Any, bucket: str, source: Path, count: int, parallel: int) -> tuple[float, float]:
    """One object of ``count`` parts of 8 MiB (the file sent ``count`` times over), 8 at a time."""
    key = f"bench-transport/{uuid.uuid4().hex}"
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    big = source.with_name("parts")
    with open(big, "wb") as out:
        for _ in range(count):
            out.write(source.read_bytes())
    parts = [
        UploadPart(part_number=n, request=_request(s3, bucket, "PART", key, UploadId=upload_id, PartNumber=n))
        for n in range(1, count + 1)
    ]
    job = MultipartUpload(upload_id=upload_id, part_size=OBJECT_BYTES, parts=parts)
    try:
        async with open_library(kind, parallel) as transport:
            return await _timed(lambda: _sent(upload_parts(transport, job, "bench", big, lambda _: None, parallel=8)))
    finally:
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
        big.unlink()


async def _gather(coroutines: Any) -> None:
    await asyncio.gather(*coroutines)


async def _sent(coroutine: Awaitable[int]) -> None:
    await coroutine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=16)
    args = parser.parse_args()
    bucket = os.environ.get("SMART_TRANSFER_TEST_S3_BUCKET", "smart-transfer")
    s3 = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL"))
    runs: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "object"
        source.write_bytes(os.urandom(OBJECT_BYTES))
        for _ in range(args.repeat):
            for count in args.counts:
                for kind in LIBRARIES:  # interleaved: a drift of the machine's load hits both alike
                    for op, run in asyncio.run(_objects(kind, s3, bucket, source, count, args.parallel)).items():
                        runs.setdefault((op, kind, count), []).append(run)
                    parts = asyncio.run(_parts(kind, s3, bucket, source, count, args.parallel))
                    runs.setdefault(("PARTS", kind, count), []).append(parts)
    print(f"{'what':<22}{'library':<9}{'wall s (median, min-max)':<28}{'CPU s (median, min-max)'}")
    for (op, kind, count), figures in sorted(runs.items()):
        walls, cpus = [f[0] for f in figures], [f[1] for f in figures]
        what = f"{count} x 8 MiB {op}" if op != "PARTS" else f"{count} parts of 8 MiB"
        print(
            f"{what:<22}{kind:<9}{statistics.median(walls):6.2f} ({min(walls):.2f}-{max(walls):.2f}){'':<10}"
            f"{statistics.median(cpus):6.2f} ({min(cpus):.2f}-{max(cpus):.2f})"
        )


if __name__ == "__main__":
    main()
