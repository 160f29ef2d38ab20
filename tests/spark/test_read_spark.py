"""``LocalDataset.to_spark``: Spark reads a workspace dataset's slice files itself (on the test session),
whole or for a range; and the example under ``examples/`` runs end to end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from smart_transfer.client import LocalError, open_dataset
from smart_transfer.protocol.codes import ErrorCode
from tests.conftest import ROOT
from tests.slices import add_slices


def test_to_spark_reads_the_slices_with_spark(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F  # noqa: N812 - Spark's own convention

    ws, name = tmp_path / "ws", "orders"
    add_slices(ws, name, tmp_path / "in", [100, 100, 100], row_group_size=25)
    with open_dataset(ws, name) as dataset:
        whole = dataset.to_spark(spark)
        assert whole.columns == ["offset", "name", "amount"]
        stats = whole.agg(F.count("*"), F.min("offset"), F.max("offset"), F.sum("amount")).first()
        assert tuple(stats) == (300, 0, 299, sum(range(300)) * 10)
        middle = dataset.to_spark(spark, offsets=(150, 249)).agg(F.count("*"), F.min("offset"), F.max("offset"))
        assert tuple(middle.first()) == (100, 150, 249)
        block = dataset.to_spark(spark, blocks=(2, 2)).agg(F.min("offset"), F.max("offset")).first()
        assert tuple(block) == (100, 199)
        ordered = dataset.to_spark(spark, offsets=(295, None)).orderBy("offset").collect()
        assert [row["name"] for row in ordered] == [f"row-{i}" for i in range(295, 300)]
        # the same rows as pyarrow reads
        assert dataset.to_arrow(offsets=(150, 249)).column("amount").to_pylist() == [
            row["amount"] for row in dataset.to_spark(spark, offsets=(150, 249)).orderBy("offset").collect()
        ]
        # a missing slice is named before Spark is asked to read anything
        dataset.path_of(dataset.slices()[0]).unlink()
        with pytest.raises(LocalError) as caught:
            dataset.to_spark(spark)
        assert caught.value.code is ErrorCode.OBJECT_NOT_FOUND and "block 1" in str(caught.value)


def test_the_example_ingests_pushes_pulls_and_reads_with_pandas_and_spark(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ingest_push_pull_read.py")],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert "A compared with its remote: same" in lines
    assert "pandas: 10000 rows, columns ['offset', 'order_id', 'customer', 'amount']" in lines
    assert "spark: 10000 rows from 1 slice file(s)" in lines
    assert "pandas and Spark agree" in lines
