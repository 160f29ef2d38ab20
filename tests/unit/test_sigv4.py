"""The fast presigner produces exactly botocore's URLs (so every S3 accepts them)."""

from __future__ import annotations

import datetime
from unittest import mock

import botocore.session
from botocore.config import Config
from hypothesis import given, settings
from hypothesis import strategies as st

from smart_transfer.storage.sigv4 import Credentials, QueryPresigner

keys = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=60)
secrets = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=8, max_size=40)
access_keys = st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=4, max_size=20)
tokens = st.none() | st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=60)
moments = st.datetimes(min_value=datetime.datetime(2000, 1, 1), max_value=datetime.datetime(2099, 12, 31))
endpoints = st.sampled_from(
    [
        "http://127.0.0.1:7480",
        "https://s3.example.com",
        "http://localhost:9000",
        "https://minio.internal:443",
        "http://s3.local:80",
    ]
)
#: One botocore session for every example: its loader reads the S3 service model once (a fresh boto3
#: session per example read it again each time, most of this module's run time).
BOTOCORE = botocore.session.get_session()
md5s = st.none() | st.binary(min_size=16, max_size=16).map(lambda b: __import__("base64").b64encode(b).decode())
sha256s = st.binary(min_size=32, max_size=32).map(lambda b: __import__("base64").b64encode(b).decode())
#: The signed headers a PUT may carry beyond its MD5 (server-side encryption, a checksum): botocore's
#: parameter name, and the HTTP header's.
SIGNED_EXTRAS = {
    "ServerSideEncryption": "x-amz-server-side-encryption",
    "SSEKMSKeyId": "x-amz-server-side-encryption-aws-kms-key-id",
    "ChecksumSHA256": "x-amz-checksum-sha256",
}
extras = st.fixed_dictionaries(
    {},
    optional={
        "ServerSideEncryption": st.sampled_from(["AES256", "aws:kms"]),
        "SSEKMSKeyId": st.sampled_from(["testkey-1", "alias/datasets", "arn:aws:kms:eu-central-1:1:key/ab-12"]),
        "ChecksumSHA256": sha256s,
    },
)


@settings(max_examples=200, deadline=None)
@given(
    endpoints,
    st.sampled_from(["bucket", "my.bucket-1"]),
    st.sampled_from(["us-east-1", "eu-central-1"]),
    keys,
    st.sampled_from(["GET", "PUT"]),
    st.integers(1, 604800),
    access_keys,
    secrets,
    tokens,
    moments,
    md5s,
    extras,
)
def test_urls_are_exactly_botocores(
    endpoint: str,
    bucket: str,
    region: str,
    key: str,
    method: str,
    expires: int,
    access: str,
    secret: str,
    token: str | None,
    moment: datetime.datetime,
    md5: str | None,
    extra: dict[str, str],
) -> None:
    client = BOTOCORE.create_client(
        "s3",
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=access,
        aws_secret_access_key=secret,
        aws_session_token=token,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    params: dict[str, str] = {"Bucket": bucket, "Key": key}
    if method == "PUT" and md5 is not None:
        params["ContentMD5"] = md5
    if method == "PUT":
        params.update(extra)
    with mock.patch("botocore.auth.get_current_datetime", return_value=moment):
        expected = client.generate_presigned_url(
            "put_object" if method == "PUT" else "get_object", Params=params, ExpiresIn=expires
        )
    client.close()
    ours = QueryPresigner(endpoint, bucket, region).presign(
        method,
        key,
        expires,
        Credentials(access, secret, token),
        md5 if method == "PUT" else None,
        now=moment.replace(tzinfo=datetime.UTC).timestamp(),
        headers={SIGNED_EXTRAS[name]: value for name, value in extra.items()} if method == "PUT" else None,
    )
    assert ours == expected


@settings(max_examples=50, deadline=None)
@given(
    endpoints,
    keys,
    st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40),
    st.integers(1, 10_000),
    st.integers(1, 604800),
    tokens,
    moments,
    st.binary(min_size=16, max_size=16).map(lambda b: __import__("base64").b64encode(b).decode()),
)
def test_upload_part_urls_are_exactly_botocores(
    endpoint: str,
    key: str,
    upload_id: str,
    part: int,
    expires: int,
    token: str | None,
    moment: datetime.datetime,
    md5: str,
) -> None:
    client = BOTOCORE.create_client(
        "s3",
        region_name="us-east-1",
        endpoint_url=endpoint,
        aws_access_key_id="AKID",
        aws_secret_access_key="secret-key",
        aws_session_token=token,
        config=Config(signature_version="s3v4", s3={"addressing_style": "path"}),
    )
    params = {"Bucket": "bucket", "Key": key, "UploadId": upload_id, "PartNumber": part, "ContentMD5": md5}
    with mock.patch("botocore.auth.get_current_datetime", return_value=moment):
        expected = client.generate_presigned_url("upload_part", Params=params, ExpiresIn=expires)
    client.close()
    ours = QueryPresigner(endpoint, "bucket", "us-east-1").presign(
        "PUT",
        key,
        expires,
        Credentials("AKID", "secret-key", token),
        md5,
        now=moment.replace(tzinfo=datetime.UTC).timestamp(),
        query=(("uploadId", upload_id), ("partNumber", str(part))),
    )
    assert ours == expected
