"""Times in the web view: "3 minutes ago" relative to the page's build, exact UTC on hover."""

from __future__ import annotations

from datetime import UTC, datetime

from smart_transfer.server.ui.when import ago, utc_text

NOW = datetime(2026, 1, 31, 12, 0, 0, tzinfo=UTC)


def test_a_block_time_reads_as_how_long_ago_in_its_largest_unit() -> None:
    assert ago("2026-01-31T11:59:30.123456Z", NOW) == "just now"
    assert ago("2026-01-31T11:57:00Z", NOW) == "3 minutes ago"
    assert ago("2026-01-31T11:00:00Z", NOW) == "1 hour ago"
    assert ago("2026-01-29T11:00:00Z", NOW) == "2 days ago"
    assert ago("2024-01-31T12:00:00Z", NOW) == "2 years ago"
    assert ago("2026-01-31T14:00:00Z", NOW) == "in 2 hours"  # a writer's clock ahead of the server's


def test_the_exact_time_is_utc_to_the_second_and_text_that_is_no_time_is_kept() -> None:
    assert utc_text("2026-01-31T11:57:00.999999Z") == "2026-01-31 11:57:00 UTC"
    assert utc_text("2026-01-31T13:57:00+02:00") == "2026-01-31 11:57:00 UTC"
    assert ago("not a time", NOW) == utc_text("not a time") == "not a time"
