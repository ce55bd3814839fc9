"""Line charts as SVG, drawn on the server: the loss curves of the dashboard.

Each series is a line (or a step line, for the edit budget) and its points as ``<circle>``
elements, classed by series and by mark (``accept``, ``reject``, ...), each with a
``<title>`` that names the series, the step and the value (the browser shows it on hover
without any script; ``static/charts.js`` shows it at once). Both axes have their tick values
and a title; the stylesheet colours the series and sizes the text. The canvas is about as wide
as a chart is drawn on the page, so its text keeps the size the stylesheet gives it. Every
text is escaped here, so the result can be put into a page as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

from markupsafe import Markup

WIDTH, HEIGHT = 560, 280
LEFT, RIGHT, TOP, BOTTOM = 62, 14, 12, 46
PAD = 0.03  # of the x range, left free at each end so that no point sits on the y axis


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    label: str  # the tooltip
    mark: str = ""  # an extra class of the point: accept, reject, refused, skip


@dataclass(frozen=True)
class Series:
    name: str
    cls: str  # the class of its line and points
    points: tuple[Point, ...]
    line: bool = True
    step: bool = False  # a step line: the value holds until the next point


@dataclass(frozen=True)
class Axes:
    """Where data coordinates land on the canvas."""

    x0: float
    x1: float
    y0: float
    y1: float
    width: int = WIDTH
    height: int = HEIGHT

    def x(self, value: float) -> float:
        span = self.x1 - self.x0 or 1.0
        return LEFT + (value - self.x0) / span * (self.width - LEFT - RIGHT)

    def y(self, value: float) -> float:
        span = self.y1 - self.y0 or 1.0
        return self.height - BOTTOM - (value - self.y0) / span * (self.height - TOP - BOTTOM)


@dataclass(frozen=True)
class Chart:
    """A chart and its legend: (class, name) of each series that has points."""

    svg: Markup
    legend: tuple[tuple[str, str], ...]


def chart(series: Sequence[Series], **options: Any) -> Chart:
    """:func:`line_chart` of ``series``, with the legend of those drawn."""
    return Chart(line_chart(series, **options),
                 tuple((s.cls, s.name) for s in series if s.points))


def line_chart(series: Sequence[Series], *, title: str, x_label: str = "step",
               y_label: str = "score", y_range: tuple[float, float] | None = None,
               integer_y: bool = False, width: int = WIDTH, height: int = HEIGHT) -> Markup:
    """An SVG chart of ``series``; ``y_range`` fixes the y axis (scores: 0 to 1)."""
    points = [p for s in series for p in s.points]
    head = (f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="{escape(title)}">'
            f"<title>{escape(title)}</title>")
    if not points:
        return Markup(head + f'<text class="empty" x="{width / 2}" y="{height / 2}" '
                      'text-anchor="middle">no data yet</text></svg>')
    xs, ys = [p.x for p in points], [p.y for p in points]
    lo, hi = y_range if y_range is not None else (min(0.0, min(ys)), max(ys))
    pad = (max(xs) - min(xs) or 1.0) * PAD
    axes = Axes(min(xs) - pad, max(xs) + pad, lo, hi if hi > lo else lo + 1, width, height)
    body = [*_grid(axes, x_label, y_label, integer_y)]
    for s in series:
        body += _series(axes, s)
    return Markup(head + "".join(body) + "</svg>")


def _grid(axes: Axes, x_label: str, y_label: str, integer_y: bool) -> list[str]:
    """The grid lines with the y axis's values, the x axis with its values, and the title of
    each axis (x below the values, y turned up the left edge)."""
    out = []
    for value in ticks(axes.y0, axes.y1, integer=integer_y):
        y = axes.y(value)
        out.append(f'<line class="grid" x1="{LEFT}" x2="{axes.width - RIGHT}" y1="{y:.1f}" '
                   f'y2="{y:.1f}"/><text class="tick y-tick" x="{LEFT - 7}" y="{y:.1f}" '
                   f'text-anchor="end" dominant-baseline="middle">{_fmt(value)}</text>')
    base = axes.height - BOTTOM
    for value in ticks(axes.x0, axes.x1, integer=True):
        x = axes.x(value)
        out.append(f'<line class="axis" x1="{x:.1f}" x2="{x:.1f}" y1="{base}" '
                   f'y2="{base + 5}"/><text class="tick x-tick" x="{x:.1f}" y="{base + 19}" '
                   f'text-anchor="middle">{_fmt(value)}</text>')
    middle = (TOP + base) / 2
    out.append(f'<line class="axis" x1="{LEFT}" x2="{axes.width - RIGHT}" y1="{base}" '
               f'y2="{base}"/><line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" '
               f'y2="{base}"/><text class="label x-label" x="{(LEFT + axes.width - RIGHT) / 2}" '
               f'y="{axes.height - 6}" text-anchor="middle">{escape(x_label)}</text>'
               f'<text class="label y-label" x="16" y="{middle:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 16 {middle:.1f})">{escape(y_label)}</text>')
    return out


def _series(axes: Axes, s: Series) -> list[str]:
    pts = sorted(s.points, key=lambda p: p.x)
    out = []
    if s.line and len(pts) > 1:
        path = [f"M{axes.x(pts[0].x):.1f},{axes.y(pts[0].y):.1f}"]
        for p in pts[1:]:
            if s.step:
                path.append(f"H{axes.x(p.x):.1f}V{axes.y(p.y):.1f}")
            else:
                path.append(f"L{axes.x(p.x):.1f},{axes.y(p.y):.1f}")
        out.append(f'<path class="line {escape(s.cls)}" d="{"".join(path)}"/>')
    for p in pts:
        classes = " ".join(c for c in ("pt", s.cls, p.mark) if c)
        out.append(f'<circle class="{escape(classes)}" cx="{axes.x(p.x):.1f}" '
                   f'cy="{axes.y(p.y):.1f}" r="4"><title>{escape(s.name)}: '
                   f"{escape(p.label)}</title></circle>")
    return out


def ticks(lo: float, hi: float, count: int = 5, integer: bool = False) -> list[float]:
    """Round values from ``lo`` to ``hi``, about ``count`` of them (whole numbers when
    ``integer``)."""
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    first = math.ceil(lo / step - 1e-9) * step
    out, value = [], first
    while value <= hi + 1e-9:
        out.append(round(value, 10))
        value += step
    return out


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
