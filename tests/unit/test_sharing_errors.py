"""Delta Sharing's error answers keep the server's status and detail: the protocol's code where its
vocabulary names the status, the server's own code (and typed details) where it does not."""

from __future__ import annotations

import asyncio

import orjson
from fastapi.responses import JSONResponse

from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import MessageTooLargeDetails, ProtocolError
from smart_transfer.server.delta_sharing.errors import SharingError, sharing_error_handler


def _answer(exc: Exception) -> tuple[int, dict[str, object]]:
    response = asyncio.run(sharing_error_handler(None, exc))  # type: ignore[arg-type]
    assert isinstance(response, JSONResponse)
    return response.status_code, orjson.loads(bytes(response.body))


def test_a_too_large_request_stays_413_with_its_own_code_and_limit() -> None:
    error = ProtocolError(ErrorCode.MESSAGE_TOO_LARGE, "over 1024 bytes", MessageTooLargeDetails(limit=1024))
    status, body = _answer(error)
    assert status == 413
    assert body == {
        "errorCode": "MessageTooLarge",
        "message": "over 1024 bytes",
        "details": {"limit": 1024},
    }
    status, body = _answer(SharingError(413, "the query body exceeds 1 bytes"))
    assert (status, body["errorCode"]) == (413, "MessageTooLarge")


def test_statuses_the_protocol_names_keep_its_codes() -> None:
    assert _answer(ProtocolError(ErrorCode.DATASET_NOT_FOUND, "no such dataset"))[1]["errorCode"] == (
        "RESOURCE_DOES_NOT_EXIST"
    )
    assert _answer(SharingError(400, "bad"))[1] == {"errorCode": "INVALID_PARAMETER_VALUE", "message": "bad"}
    status, body = _answer(ProtocolError(ErrorCode.UPLOAD_INVALID, "x"))
    assert (status, body["errorCode"]) == (400, "INVALID_PARAMETER_VALUE")
    status, body = _answer(ProtocolError(ErrorCode.DIVERGED, "x"))
    assert (status, body["errorCode"]) == (409, "Diverged")


def test_a_failure_is_the_protocols_internal_error_and_an_unknown_refusal_a_bad_parameter() -> None:
    status, body = _answer(RuntimeError("boom"))
    assert (status, body["errorCode"]) == (500, "INTERNAL_ERROR")
    for odd in (411, 415, 422):
        assert _answer(SharingError(odd, "no"))[1]["errorCode"] == "INVALID_PARAMETER_VALUE"
