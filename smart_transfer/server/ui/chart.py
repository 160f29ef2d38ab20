"""The geometry of the dataset page's growth charts: records and data bytes over versions (repo/growth.py's
points) placed in an SVG view box the template draws inline (no script, no style attribute: the page's
CSP allows it). Each chart has its own scale, from 0 to its largest value."""

from __future__ import annotations

from dataclasses import dataclass

from smart_transfer.repo.growth import GrowthPoint

#: The view box: width and height, and the margins left (for the scale's labels) and below (the axis's).
WIDTH, HEIGHT = 480, 160
LEFT, RIGHT, TOP, BOTTOM = 72, 12, 12, 24
#: The figures each chart draws: its id and what it counts.
SERIES = {"records": "records", "data_bytes": "data bytes"}


@dataclass(frozen=True)
class ChartPoint:
    """One point: the block, its value and where it is drawn."""

    sequence: int
    value: int
    x: float
    y: float


@dataclass(frozen=True)
class Chart:
    """One series over versions: its points, the polyline through them, its scale's top and its axes."""

    key: str
    what: str
    points: tuple[ChartPoint, ...]
    polyline: str
    top: int
    first: int
    last: int
    plot: tuple[int, int, int, int]  # left, top, right, bottom of the plotting area
    box: str = f"0 0 {WIDTH} {HEIGHT}"


def _place(sequence: int, value: int, span: tuple[int, int], top: int) -> tuple[float, float]:
    """Where a value at a block is drawn: x by sequence number across the chain, y by value from 0 to top."""
    first, last = span
    width, height = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x = LEFT + (width * (sequence - first) / (last - first) if last > first else width / 2)
    y = TOP + height * (1 - value / top)
    return round(x, 1), round(y, 1)


def chart(points: list[GrowthPoint], key: str) -> Chart:
    """The chart of one series (``records`` or ``data_bytes``) of the points, oldest first."""
    values = [(point.sequence_number, int(getattr(point, key))) for point in points]
    top = max([value for _, value in values] + [1])
    span = (values[0][0], values[-1][0]) if values else (0, 0)
    placed = tuple(ChartPoint(seq, value, *_place(seq, value, span, top)) for seq, value in values)
    polyline = " ".join(f"{point.x},{point.y}" for point in placed)
    return Chart(key, SERIES[key], placed, polyline, top, span[0], span[1], (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM))


def charts(points: list[GrowthPoint]) -> list[Chart]:
    """Both charts: records, then data bytes."""
    return [chart(points, key) for key in SERIES]
