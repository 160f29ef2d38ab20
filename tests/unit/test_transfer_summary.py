"""A pull's or push's summary as the JSON values ``--json`` prints: what it holds is the caller's own."""

from __future__ import annotations

import orjson

from smart_transfer.client.flows.moving import TransferSummary


def test_the_summary_as_json_values_is_a_copy_without_the_start_time() -> None:
    summary = TransferSummary("pull", "ds", "http://127.0.0.1:1/ds", None, None)
    summary.peers_dropped["http://127.0.0.1:2"] = "answered 500"
    data = summary.to_dict()
    assert "started" not in data
    assert data["peers_dropped"] == {"http://127.0.0.1:2": "answered 500"}
    data["peers_dropped"]["http://127.0.0.1:3"] = "changed by the caller"
    assert summary.peers_dropped == {"http://127.0.0.1:2": "answered 500"}
    assert orjson.loads(orjson.dumps(data))["operation"] == "pull"
