"""The adaptive admission limit (server/adaptive.py) and the concurrency limit that asks it
(server/limits.py): deterministic, with an injected clock; no speed is asserted anywhere."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from smart_transfer.config import SettingError
from smart_transfer.server.adaptive import AdaptiveBounds, AdaptiveLimit
from smart_transfer.server.limits import Busy, ConcurrencyLimit
from smart_transfer.server.metrics import Metrics
from smart_transfer.server.settings import ServerSettings


def bounds(**changed: float) -> AdaptiveBounds:
    values = dict(minimum=2, maximum=64, initial=64, interval=1.0, smoothing=0.5, tolerance=2.0, baseline_samples=1000)
    values.update(changed)
    return AdaptiveBounds(**values)  # type: ignore[arg-type]


def feed(limit: AdaptiveLimit, seconds: float, windows: int, start: float, in_flight: int, kind: str = "read") -> float:
    """``windows`` closed windows of ten samples of ``seconds`` each; the time after them."""
    now = start
    for _ in range(windows):
        for _ in range(10):
            now += 0.11
            limit.sample(kind, seconds, now, in_flight)
    return now


def test_limit_shrinks_when_latency_rises_far_above_the_usual() -> None:
    limit = AdaptiveLimit(bounds())
    now = feed(limit, 0.05, windows=5, start=0.0, in_flight=64)
    assert limit.admits == 64  # as usual: stays at the cap
    feed(limit, 1.0, windows=10, start=now, in_flight=64)  # twenty times the usual
    assert limit.admits < 32
    assert limit.last_ratio > 2.0


def test_a_lasting_load_within_the_tolerance_does_not_become_the_usual() -> None:
    """Load added a step at a time: latency 3x the unloaded usual (within the tolerance, 4) for a long
    while teaches the usual nothing, so 6x afterwards still shrinks the limit."""
    limit = AdaptiveLimit(bounds(tolerance=4.0, baseline_samples=50))
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=64)
    now = feed(limit, 0.15, windows=30, start=now, in_flight=64)
    assert limit.admits == 64
    assert limit.baselines["read"].seconds < 0.06
    feed(limit, 0.3, windows=3, start=now, in_flight=64)
    assert limit.admits < 64


def test_latency_just_within_the_tolerance_holds_the_limit() -> None:
    """Between halfway to the tolerance and the tolerance the limit neither grows nor shrinks: noise just
    under the tolerance does not ratchet it up between cuts."""
    limit = AdaptiveLimit(bounds(tolerance=4.0, initial=32))
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=32)
    assert limit.admits > 32  # as usual and in use: grows
    now = feed(limit, 0.15, windows=2, start=now, in_flight=64)  # 3x the usual: within 4, beyond 2.5
    held = limit.admits  # (the window that closed as the change came saw both)
    feed(limit, 0.15, windows=20, start=now, in_flight=64)
    assert limit.admits == held


def test_the_limit_shrinks_from_what_is_in_use_but_at_most_by_half_at_once() -> None:
    """A limit far above its use comes down to where it bites within a few windows, not many; one slow
    window under light use does not take it to its minimum."""
    limit = AdaptiveLimit(bounds())
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=10)
    seen = []
    for _ in range(4):
        now = feed(limit, 1.0, windows=1, start=now, in_flight=10)
        seen.append(limit.admits)
    assert min(seen[:2]) >= 16  # the first slow window: from half the limit (32), not from the 10 in use
    assert seen[-1] <= 10


def test_limit_grows_back_slowly_when_latency_is_fine_again() -> None:
    limit = AdaptiveLimit(bounds(initial=4))
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=4)
    after_three = limit.admits
    assert 4 < after_three < 64  # grows, by about sqrt(limit) per window, not to the cap at once
    feed(limit, 0.05, windows=60, start=now, in_flight=64)
    assert limit.admits == 64


def test_an_idle_limit_does_not_grow() -> None:
    limit = AdaptiveLimit(bounds(initial=8))
    feed(limit, 0.05, windows=20, start=0.0, in_flight=1)  # one holder of 8: latency says nothing of 16
    assert limit.admits == 8


def test_kinds_have_their_own_usual_duration() -> None:
    limit = AdaptiveLimit(bounds())
    now = feed(limit, 0.02, windows=3, start=0.0, in_flight=64, kind="read")
    now = feed(limit, 2.0, windows=3, start=now, in_flight=64, kind="write")  # pushes are long, not a sign of load
    assert limit.admits == 64
    assert set(limit.baselines) == {"read", "write"}
    assert limit.baselines["write"].seconds > limit.baselines["read"].seconds


def test_a_window_needs_its_interval_and_a_few_samples() -> None:
    limit = AdaptiveLimit(bounds())
    feed(limit, 0.05, windows=2, start=0.0, in_flight=64)
    before = limit.limit
    limit.sample("read", 50.0, 100.0, 64)  # one slow sample opens a window; alone it moves nothing
    limit.sample("read", 50.0, 200.0, 64)
    assert limit.limit == before


def test_one_very_long_session_weighs_at_most_max_ratio() -> None:
    limit = AdaptiveLimit(bounds())
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=64)
    limit.sample("read", 3600.0, now + 0.1, 64)  # a pull --follow that lasted an hour
    feed(limit, 0.05, windows=1, start=now + 0.1, in_flight=64)
    assert limit.admits > 48


@settings(max_examples=200, deadline=None)
@given(
    minimum=st.integers(1, 20),
    extra=st.integers(0, 100),
    smoothing=st.floats(0.01, 1.0),
    tolerance=st.floats(1.0, 10.0),
    samples=st.lists(
        st.tuples(st.sampled_from(["read", "write"]), st.floats(0.0, 1e4), st.floats(0.0, 5.0), st.integers(0, 200)),
        max_size=300,
    ),
)
def test_the_limit_always_stays_within_its_bounds(
    minimum: int, extra: int, smoothing: float, tolerance: float, samples: list[tuple[str, float, float, int]]
) -> None:
    limit = AdaptiveLimit(AdaptiveBounds(minimum, minimum + extra, minimum + extra // 2, 0.5, smoothing, tolerance, 50))
    now = 0.0
    for kind, seconds, step, in_flight in samples:
        now += step
        limit.sample(kind, seconds, now, in_flight)
        assert minimum <= limit.admits <= minimum + extra
        assert minimum <= limit.limit <= minimum + extra


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_limit_below_its_cap_refuses_the_excess_with_busy_and_counts_it() -> None:
    clock = Clock()
    adaptive = AdaptiveLimit(bounds(minimum=1, maximum=4, initial=1))
    slots = ConcurrencyLimit("sessions", 4, 4, retry_after=3, adaptive=adaptive, clock=clock)

    async def two() -> None:
        async with slots.hold("a"), slots.hold("b"):
            pass

    with pytest.raises(Busy) as refused:
        asyncio.run(two())
    assert refused.value.retry_after == 3
    assert "adaptive limit 1 of 4" in str(refused.value)
    assert slots.adaptive_refusals == 1 and slots.active == 0


def test_store_calls_are_the_samples_timed_as_reported() -> None:
    clock = Clock()
    adaptive = AdaptiveLimit(bounds())
    slots = ConcurrencyLimit("requests", 64, 64, retry_after=1, adaptive=adaptive, clock=clock)
    slots.observe_store("GetObject", 2.5)
    slots.observe_store("ListObjectsV2.ref", 0.01)
    assert adaptive.baselines["GetObject"].seconds == pytest.approx(2.5)
    assert adaptive.baselines["ListObjectsV2.ref"].seconds == pytest.approx(0.01)


def test_holding_a_slot_long_is_no_sample() -> None:
    """A session lasts as long as its client takes: its duration does not move the limit."""
    clock = Clock()
    adaptive = AdaptiveLimit(bounds())
    slots = ConcurrencyLimit("sessions", 64, 64, retry_after=1, adaptive=adaptive, clock=clock)

    async def hold() -> None:
        async with slots.hold("a"):
            clock.now += 3600.0

    asyncio.run(hold())
    assert adaptive.baselines == {} and slots.active == 0


def test_static_admission_keeps_the_cap_and_exports_the_state() -> None:
    settings_ = ServerSettings(admission="static")
    assert settings_.adaptive_bounds(64) is None
    metrics = Metrics()
    slots = ConcurrencyLimit("sessions", 5, 5, retry_after=1)
    metrics.watch_admission(slots)
    text = metrics.render().decode()
    assert 'smart_transfer_admission_limit{limit="sessions"} 5.0' in text
    assert 'smart_transfer_admission_refusals_total{limit="sessions"} 0.0' in text


def test_adaptive_bounds_come_from_the_settings_within_each_cap() -> None:
    found = ServerSettings(admission_min=10, admission_initial=0.5).adaptive_bounds(4)
    assert found is not None and (found.minimum, found.initial, found.maximum) == (4, 4, 4)
    with pytest.raises(SettingError, match="--admission-tolerance"):
        ServerSettings(admission_tolerance=0.5)
    with pytest.raises(SettingError, match="--admission"):
        ServerSettings(admission="fast")


def test_a_lasting_slowdown_becomes_the_usual_once_the_limit_is_at_its_minimum() -> None:
    limit = AdaptiveLimit(bounds(baseline_samples=50))
    now = feed(limit, 0.05, windows=3, start=0.0, in_flight=64)
    seen = []
    for _ in range(100):  # the store gets twenty times slower and stays so
        now = feed(limit, 1.0, windows=1, start=now, in_flight=64)
        seen.append(limit.admits)
    assert min(seen) == 2  # first the minimum
    assert seen[-1] > 2 and seen.index(2) < len(seen) - 1
    assert limit.baselines["read"].seconds > 0.5


def test_the_session_limit_is_the_lower_of_the_store_and_the_pace_limits() -> None:
    """Sessions that take far longer than their usual shrink the pace limit, and with it the session
    limit, while the store answers as usual; a request limit has no pace and ignores holds."""
    clock = Clock()
    store = AdaptiveLimit(bounds())
    pace = AdaptiveLimit(bounds(tolerance=8.0))
    sessions = ConcurrencyLimit("sessions", 64, 64, retry_after=1, adaptive=store, clock=clock, pace=pace)
    for _ in range(30):  # usual pulls and store calls
        clock.now += 0.11
        sessions.observe_hold("pull 100+ B", 0.05)
        sessions.observe_store("GetObject", 0.01)
    assert sessions.limit == 64
    for _ in range(30):  # the store as usual, sessions 30 times slower
        clock.now += 0.11
        sessions.observe_hold("pull 100+ B", 1.5)
        sessions.observe_store("GetObject", 0.01)
    assert store.admits == 64
    assert pace.admits < 64 and sessions.limit == pace.admits
    requests = ConcurrencyLimit("requests", 64, 64, retry_after=1, adaptive=AdaptiveLimit(bounds()), clock=clock)
    requests.observe_hold("pull 100+ B", 100.0)
    assert requests.limit == 64


def test_a_session_is_timed_by_flow_and_decade_of_metadata_bytes() -> None:
    from types import SimpleNamespace

    from smart_transfer.server.smart_routes import pace_kind

    def kind(received: int, sent: int) -> str:
        return pace_kind("pull", SimpleNamespace(bytes_received=received, bytes_sent=sent))  # type: ignore[arg-type]

    assert kind(0, 0) == "pull 1+ B"
    assert kind(120, 300) == "pull 100+ B"
    assert kind(4_000, 6_000) == "pull 10000+ B"


def test_the_pace_follows_its_own_setting() -> None:
    assert ServerSettings().pace_bounds(64) is not None
    found = ServerSettings(admission_pace_tolerance=3).pace_bounds(64)
    assert found is not None and found.tolerance == 3 and found.delay_target == 0
    assert ServerSettings(admission_pace_tolerance=0).pace_bounds(64) is None
    assert ServerSettings(admission="static").pace_bounds(64) is None
    with pytest.raises(SettingError, match="--admission-pace-tolerance"):
        ServerSettings(admission_pace_tolerance=0.5)


def test_a_hold_with_a_kind_is_a_pace_sample_when_it_ends_normally() -> None:
    """A request's slot, held with its kind, times the request for the pace; one that failed is no sample."""
    clock = Clock()
    pace = AdaptiveLimit(bounds(tolerance=8.0))
    requests = ConcurrencyLimit(
        "requests", 64, 64, retry_after=1, adaptive=AdaptiveLimit(bounds()), clock=clock, pace=pace
    )

    async def held(kind: str, seconds: float, fail: bool = False) -> None:
        async with requests.hold("a", kind):
            clock.now += seconds
            if fail:
                raise ValueError("the handler failed")

    asyncio.run(held("GET /{dataset}", 0.25))
    assert pace.baselines["GET /{dataset}"].seconds == pytest.approx(0.25)
    with pytest.raises(ValueError):
        asyncio.run(held("GET /{dataset}/refs/head", 9.0, fail=True))
    asyncio.run(held("GET /", 1.0))
    assert set(pace.baselines) == {"GET /{dataset}", "GET /"}
    assert requests.active == 0


def test_requests_are_timed_by_route_and_object_bytes_are_not() -> None:
    """The pace's kind of a request is its method and route; an object's bytes read or written through the
    server are not timed (the slot is held while the body streams: its duration is the object's size)."""
    from starlette.requests import Request

    from smart_transfer.server.rest_common import operation_of

    class Route:
        path = "/{dataset}/blocks/{block_hash}"

    def request(method: str, params: dict[str, str]) -> Request:
        return Request({"type": "http", "method": method, "path_params": params, "route": Route(), "headers": []})

    assert operation_of(request("GET", {"dataset": "a", "block_hash": "f1220"})) == "GET /{dataset}/blocks/{block_hash}"
    assert operation_of(request("GET", {"dataset": "a", "kind": "data", "object_hash": "f1220"})) is None
    assert operation_of(request("PUT", {"dataset": "a", "kind": "data", "object_hash": "f1220"})) is None


@pytest.mark.parametrize("spread", [0.5, 0.75, 1.0])
def test_a_kind_whose_latency_varies_widely_does_not_look_loaded(spread: float) -> None:
    """Unloaded latencies of one kind spread widely (log-normal, sigma ``spread``: at 1.0 the p99 is ten
    times the median): the limit stays at the cap, though the usual learns from the fast side only (see
    adaptive.py on the limit of that: a sigma of 1.3 would swing it)."""
    import random

    draw = random.Random(7)
    limit = AdaptiveLimit(bounds(tolerance=4.0, smoothing=0.2, baseline_samples=500))
    now = 0.0
    lowest = limit.admits
    for _ in range(20_000):
        now += 0.02
        limit.sample("GetObject", 0.1 * math.exp(draw.gauss(0.0, spread)), now, 64)
        lowest = min(lowest, limit.admits)
    assert lowest == 64
    assert 0.03 < limit.baselines["GetObject"].seconds < 0.2
