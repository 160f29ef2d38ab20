"""One map between HTTP statuses and error codes: code_of_status inverts HTTP_STATUS."""

from __future__ import annotations

from smart_transfer.protocol.codes import CONNECTION_LIMIT_STATUS, HTTP_STATUS, ErrorCode, code_of_status


def test_every_status_maps_back_to_a_code_with_that_status() -> None:
    for status in set(HTTP_STATUS.values()):
        code = code_of_status(status)
        assert HTTP_STATUS[code] == status or (status == CONNECTION_LIMIT_STATUS and code is ErrorCode.BUSY)


def test_shared_statuses_stand_for_the_general_code() -> None:
    assert code_of_status(403) is ErrorCode.FORBIDDEN
    assert code_of_status(503) is ErrorCode.BUSY
    assert code_of_status(404) is ErrorCode.NO_SUCH_ROUTE
    assert code_of_status(401) is ErrorCode.UNAUTHORIZED
    assert code_of_status(429) is ErrorCode.BUSY
    assert code_of_status(418) is ErrorCode.INTERNAL
