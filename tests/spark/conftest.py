"""One Spark session for every Spark test (starting a JVM costs ~10 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from smart_transfer.ingest.spark import spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = spark_session("local[2]", "smart-transfer-tests")
    yield session
    session.stop()
