"""An adaptive concurrency limit (a gradient limiter in the style of Netflix's concurrency-limits
``Gradient2``), pure: no I/O, no clock of its own. The server's session and request limits ask it how many
holders they may admit. Its samples are timed operations of named kinds: the server's calls to its store,
and, in a second instance per limit (its pace), the limit's own holders: whole sessions, whole requests.

Why these: past the knee the store saturates under the clients' own presigned transfers, and it answers the
server's own calls later too; a call's latency is the store's. Calls differ by kind (a LIST is not a PUT):
each sample is divided by the usual latency of its own kind, the S3 operation: a ratio near 1 is "as
usual". A store that keeps up does not mean sessions do, though: where clients, server and store share the
machine (the load test's two cores), 200 clients made the store's calls 4x slower than usual and admitted
sessions 10-30x, while holding sessions to 24 at once kept their p99 under 2 s at the same throughput. So
each limit also watches its own holders, by kind (a session's flow and the decade of the metadata bytes
it exchanged: an up-to-date pull is not a 10 000-object one; a request's method and route), with a wider
tolerance of its own: an operation lasts as long as its client takes, and a crowd of slow clients looks
like load too (bounded: the limit never goes below its minimum, and at the minimum the usual learns,
below). Both limits are paced, not sessions alone: paced alone, sessions gave way to requests, which
took the CPU they left, and the sessions' pace kept falling.

Every ``interval`` seconds that saw enough samples, the mean ratio of that window is compared with the
``tolerance``: ``gradient = clamp(tolerance / ratio, 0.5, 1)``; the target is ``limit * gradient`` when
latency is above the tolerance, else ``limit + sqrt(limit)``, and
``limit <- (1 - smoothing) * limit + smoothing * target``, within ``[minimum, maximum]``. Fine latency
(within ``GROWTH_SHARE`` of the way to the tolerance; between that and the tolerance the limit holds)
grows the limit by ``smoothing * sqrt(limit)`` per window, but only while at least half of it is in use
(an idle limit proves nothing). Rising latency shrinks it, by at most ``smoothing / 2`` per window, from
the most holders the window saw rather than from the limit when it had holders, but from no less than
half the limit: a limit far above its use comes down to where it bites within a few windows, and one
slow window under light load does not take it to its minimum. A limit none of whose holders ran shrinks
too, from itself: the store is both limits'.

The baseline is the mean of a kind's first samples, then an exponential average over about
``baseline_samples`` samples of those that looked unloaded (within ``USUAL_RATIO``, see ``_ratio``); one
call far slower than usual (a retry after a timeout) weighs at most ``MAX_RATIO_OVER_TOLERANCE`` times
the tolerance. Learning from the fast side only pulls the usual below the mean of a kind whose latency
varies widely: measured in simulation, a log-normal latency with sigma up to 1.0 (p99 10 times the
median) stays at the cap unloaded with the store's tolerance of 4, sigma 1.3 does not (it swings to the
minimum and back). Typical values (geometric means, a symmetric learning band) would not have that
limit; with them the pace bit less at 200 clients and the load test's p99 rose above 2 s, so they are
not used.

A second signal is the server's own delay (``delay``: how late it runs its work, see
server/congestion.py), for the overload the first cannot see: the server itself is the bottleneck (its
CPU, its event loop) while the store answers on time. When a window closes with the delay above
``delay_target``, the limit drops at once (not smoothed) to ``min(limit, busiest) * gradient`` with
``gradient = clamp(delay_target / delay, 0.5, 1)``: from what was really in use, because a limit far above
its use would otherwise take many windows to come down to where it bites. It does not drop again while
more holders than the limit still run (the last drop has not taken effect: the delay's average lags
behind), nor when none of its holders ran (the other limit's did: both limits see the one delay). It
grows back as above."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

#: A window needs this many samples before it moves the limit (fewer say nothing reliable).
MIN_WINDOW_SAMPLES = 3
#: A kind's first samples make its baseline (their plain mean; until then its samples count as usual).
WARM_UP_SAMPLES = 20
#: One sample's ratio to its baseline is capped at this multiple of the tolerance (10 for the store's
#: default 4): one call that waited out a timeout is one long sample, not a reason to halve the limit.
MAX_RATIO_OVER_TOLERANCE = 2.5
#: A sample within this multiple of its kind's usual latency teaches the usual (see ``_ratio``): well
#: below the tolerance, so that the usual stays what an unloaded store answers. Measured on the local S3
#: with the load test: the server's calls took 5-10 ms with 50 clients, 15-30 with 100, 35-70 with 200;
#: learning everything within the tolerance (4) made the 100-client latency the usual, and 200 clients
#: then looked like 2x.
USUAL_RATIO = 2.0
#: A window grows the limit only when its mean ratio is within this share of the way from usual (1) to the
#: tolerance (2.5 for the store's 4, 4.5 for the pace's 8); between that and the tolerance the limit holds
#: (hysteresis). Without it every window just under the tolerance added to
#: the limit and every one just over took from it, and several servers behind one balancer (each adding
#: its own step) settled on more holders in all than one server did.
GROWTH_SHARE = 0.5
#: The most one window may shrink the target (Gradient2's floor).
MIN_GRADIENT = 0.5


@dataclass(frozen=True)
class AdaptiveBounds:
    """The limiter's settings (see the ``--admission-*`` server settings)."""

    minimum: int
    maximum: int
    initial: int
    interval: float
    smoothing: float
    tolerance: float
    baseline_samples: int
    #: The server's delay (seconds) above which the limit drops; 0: the delay is not watched.
    delay_target: float = 0.0

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.maximum or not self.minimum <= self.initial <= self.maximum:
            raise ValueError(f"need 1 <= minimum <= initial <= maximum, got {self}")


@dataclass
class _Baseline:
    """The long-term average latency of one kind of operation."""

    seconds: float = 0.0
    samples: int = 0


@dataclass
class AdaptiveLimit:
    """The current limit and what it was computed from. ``sample`` records one finished operation at
    time ``now``; the limit moves when a window of ``interval`` seconds has closed."""

    bounds: AdaptiveBounds
    #: How late the server runs its work now (seconds), asked when a window closes; None: not watched.
    delay: Callable[[], float] | None = None
    limit: float = field(init=False)
    window_started: float | None = None
    #: The last closed window's mean ratio of latency to baseline (1: as usual) and mean latency.
    last_ratio: float = 1.0
    last_seconds: float = 0.0
    #: The server's delay when the last window closed (0 when not watched).
    last_delay: float = 0.0
    baselines: dict[str, _Baseline] = field(default_factory=dict)
    _ratios: list[float] = field(default_factory=list)
    _seconds: list[float] = field(default_factory=list)
    #: The most holders seen in the window: did it use the limit?
    _busiest: int = 0

    def __post_init__(self) -> None:
        self.limit = float(self.bounds.initial)

    @property
    def admits(self) -> int:
        """How many holders the limit admits now (a whole number within the bounds)."""
        return max(self.bounds.minimum, min(self.bounds.maximum, int(self.limit)))

    def sample(self, kind: str, seconds: float, now: float, in_flight: int) -> None:
        """One sample of ``kind`` (a store call, or a session) that took ``seconds`` and ended at ``now``,
        when ``in_flight`` holders (itself included) had slots."""
        seconds = max(seconds, 1e-6)
        self._ratios.append(min(MAX_RATIO_OVER_TOLERANCE * self.bounds.tolerance, self._ratio(kind, seconds)))
        self._seconds.append(seconds)
        self._busiest = max(self._busiest, in_flight)
        if self.window_started is None:
            self.window_started = now
        if now - self.window_started >= self.bounds.interval and len(self._ratios) >= MIN_WINDOW_SAMPLES:
            self._close_window(self._busiest)
            self.window_started = now

    def _ratio(self, kind: str, seconds: float) -> float:
        """This sample against its kind's baseline (before the sample joins it). The baseline learns from
        samples that look unloaded (within USUAL_RATIO of it, or the tolerance if lower), so that a load
        does not become the usual by lasting, nor creep up a step at a time as clients are added; and from
        every sample while the limit sits at its minimum, so that a store that got slower for good becomes
        the usual instead of a reason to refuse forever."""
        baseline = self.baselines.setdefault(kind, _Baseline())
        if baseline.samples < WARM_UP_SAMPLES:  # the first samples: their plain mean
            baseline.samples += 1
            baseline.seconds += (seconds - baseline.seconds) / baseline.samples
            return 1.0
        ratio = seconds / baseline.seconds
        if ratio <= min(self.bounds.tolerance, USUAL_RATIO) or self.admits <= self.bounds.minimum:
            baseline.seconds += 2.0 / (self.bounds.baseline_samples + 1) * (seconds - baseline.seconds)
            baseline.samples += 1
        return ratio

    def _close_window(self, busiest: int) -> None:
        ratio = sum(self._ratios) / len(self._ratios)
        self.last_ratio, self.last_seconds = ratio, sum(self._seconds) / len(self._seconds)
        self._ratios.clear()
        self._seconds.clear()
        self._busiest = 0
        if self._server_late(busiest):
            return
        gradient = max(MIN_GRADIENT, min(1.0, self.bounds.tolerance / ratio))
        grows_within = 1.0 + GROWTH_SHARE * (self.bounds.tolerance - 1.0)
        if gradient >= 1.0 and (busiest < self.limit / 2 or ratio > grows_within):
            # latency is fine but the limit is not in use (growing it would prove nothing), or only just
            # within the tolerance: hold, so that noise does not ratchet the limit up between cuts
            return
        # grow additively (about sqrt(limit)), shrink multiplicatively, from what was in use (a limit far
        # above its use would take many windows to come down to where it bites; a limit none of whose
        # holders ran shrinks from itself: the store is both limits'): Gradient2 adds its queue term on
        # both, which keeps the limit at 4 or more however slow the store gets (L = L/2 + sqrt(L))
        start = self.limit
        if gradient < 1.0 and busiest > 0:  # from what was in use, but at most half the limit at once
            start = min(self.limit, max(float(busiest), self.limit * MIN_GRADIENT))
        target = start * gradient if gradient < 1.0 else self.limit + math.sqrt(self.limit)
        smoothed = (1 - self.bounds.smoothing) * start + self.bounds.smoothing * target
        self.limit = max(float(self.bounds.minimum), min(float(self.bounds.maximum), smoothed))

    def _server_late(self, busiest: int) -> bool:
        """Drop the limit when the server's delay is above its target (see the module's docstring);
        whether it was."""
        target = self.bounds.delay_target
        self.last_delay = self.delay() if self.delay is not None and target > 0 else 0.0
        if self.last_delay <= target or target <= 0:
            return False
        if busiest == 0 or busiest > self.limit:
            # none of this limit's holders made the server late (the other limit's may have), or the
            # last cut has not taken effect yet (holders admitted before it still run): hold, do not cut
            return True
        gradient = max(MIN_GRADIENT, target / self.last_delay)
        dropped = min(self.limit, float(busiest)) * gradient
        self.limit = max(float(self.bounds.minimum), min(float(self.bounds.maximum), dropped))
        return True
