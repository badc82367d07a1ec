"""Charts as inline SVG strings (pure): no plotting library, no network, prints in vector.

Every label that came from a config, a model or a document is escaped here; the template
marks the returned SVG safe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["BarGroup", "grouped_bars", "latency_strips", "sparkline", "stacked_shares"]

PALETTE = ("#3b6ea8", "#e0a030", "#5a9e6f", "#b5485d", "#7d64a8", "#4d9aa6")
VERDICT_COLOURS = {
    "supported": "#5a9e6f",
    "unsupported": "#e0a030",
    "contradicted": "#b5485d",
    "unverifiable": "#9a9a9a",
}
_FONT = 'font-family="system-ui, sans-serif" font-size="12"'


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _svg(width: int, height: int, body: list[str], title: str, fluid: bool = True) -> str:
    size = 'width="100%"' if fluid else f'width="{width}" height="{height}"'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'{size} role="img" aria-label="{escape(title)}" {_FONT}>'
        f"<title>{escape(title)}</title>{''.join(body)}</svg>"
    )


@dataclass
class BarGroup:
    """One pipeline's bars: values by series name, with optional 95 % intervals."""

    label: str
    values: dict[str, float | None]
    intervals: dict[str, tuple[float, float] | None]


def grouped_bars(groups: Sequence[BarGroup], series: Sequence[str], title: str, unit: str) -> str:
    """Horizontal bars, one group per pipeline, one bar per series, interval whiskers."""
    bar, gap, left, right = 16, 14, 150, 70
    width = 640
    top = 24
    height = top + len(groups) * (len(series) * bar + gap) + 20
    largest = max(
        [v for g in groups for v in g.values.values() if v is not None]
        + [hi for g in groups for iv in g.intervals.values() if iv for hi in iv[1:]]
        + [1e-9]
    )
    scale = (width - left - right) / largest
    body = []
    for n, name in enumerate(series):  # legend
        x = left + n * 150
        body.append(
            f'<rect x="{x}" y="4" width="10" height="10" fill="{PALETTE[n % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="13">{escape(name)}</text>'
        )
    y = top
    for group in groups:
        body.append(
            f'<text x="{left - 8}" y="{y + len(series) * bar / 2 + 4}" text-anchor="end">'
            f"{escape(group.label)}</text>"
        )
        for n, name in enumerate(series):
            value = group.values.get(name)
            colour = PALETTE[n % len(PALETTE)]
            if value is None:
                body.append(
                    f'<text x="{left + 4}" y="{y + bar - 4}" fill="#777">{escape(name)}: not measured</text>'
                )
            else:
                body.append(
                    f'<rect x="{left}" y="{y + 2}" width="{max(value * scale, 1):.1f}" '
                    f'height="{bar - 4}" fill="{colour}"><title>{escape(name)}: '
                    f"{_number(value)} {escape(unit)}</title></rect>"
                )
                end = left + value * scale
                interval = group.intervals.get(name)
                if interval:
                    low, high = (left + v * scale for v in interval)
                    mid = y + bar / 2
                    body.append(
                        f'<path d="M{low:.1f} {mid}H{high:.1f}M{low:.1f} {mid - 4}V{mid + 4}'
                        f'M{high:.1f} {mid - 4}V{mid + 4}" stroke="#222" fill="none"/>'
                    )
                    end = max(end, high)
                body.append(f'<text x="{end + 6:.1f}" y="{y + bar - 4}">{_number(value)}</text>')
            y += bar
        y += gap
    body.append(
        f'<text x="{width - right}" y="{height - 4}" text-anchor="end" fill="#555">{escape(unit)}</text>'
    )
    return _svg(width, height, body, title)


def stacked_shares(rows: Sequence[tuple[str, dict[str, int]]], title: str) -> str:
    """One 100 % bar per pipeline: claim verdicts as shares, counts in the tooltips."""
    left, width, bar, gap, top = 150, 640, 18, 10, 24
    span = width - left - 20
    height = top + len(rows) * (bar + gap) + 8
    body = []
    for n, (verdict, colour) in enumerate(VERDICT_COLOURS.items()):
        key_x = left + n * 115
        body.append(
            f'<rect x="{key_x}" y="4" width="10" height="10" fill="{colour}"/>'
            f'<text x="{key_x + 14}" y="13">{verdict}</text>'
        )
    y = top
    for label, counts in rows:
        total = sum(counts.values())
        body.append(
            f'<text x="{left - 8}" y="{y + bar - 5}" text-anchor="end">{escape(label)}</text>'
        )
        x = float(left)
        if not total:
            body.append(
                f'<text x="{left + 4}" y="{y + bar - 5}" fill="#777">no claims judged</text>'
            )
        for verdict, colour in VERDICT_COLOURS.items():
            count = counts.get(verdict, 0)
            if not total or not count:
                continue
            w = span * count / total
            body.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{colour}">'
                f"<title>{verdict}: {count} of {total} claims ({count / total:.0%})</title></rect>"
            )
            if w > 34:
                body.append(
                    f'<text x="{x + 4:.1f}" y="{y + bar - 5}" fill="#fff">{count / total:.0%}</text>'
                )
            x += w
        y += bar + gap
    return _svg(width, height, body, title)


def latency_strips(rows: Sequence[tuple[str, Sequence[float]]], title: str, unit: str = "s") -> str:
    """Every request as a dot on a log axis, one strip per pipeline, p50 and p95 ticks."""
    left, width, strip, top = 150, 640, 30, 10
    present = [v for _, values in rows for v in values if v > 0]
    height = top + len(rows) * strip + 34
    body = []
    if not present:
        body.append(f'<text x="{left}" y="{top + 14}" fill="#777">not measured</text>')
        return _svg(width, height, body, title)
    low = 10 ** math.floor(math.log10(min(present)))
    high = 10 ** math.ceil(math.log10(max(present)))
    if high <= low:
        high = low * 10
    span = width - left - 20

    def x_of(value: float) -> float:
        return left + span * (math.log10(max(value, low)) - math.log10(low)) / (
            math.log10(high) - math.log10(low)
        )

    y = top
    for label, values in rows:
        mid = y + strip / 2
        body.append(f'<text x="{left - 8}" y="{mid + 4}" text-anchor="end">{escape(label)}</text>')
        body.append(f'<line x1="{left}" x2="{left + span}" y1="{mid}" y2="{mid}" stroke="#ddd"/>')
        ordered = sorted(values)
        for k, value in enumerate(ordered):
            jitter = ((k * 7) % 9 - 4) * 1.2  # spread equal values without randomness
            body.append(
                f'<circle cx="{x_of(value):.1f}" cy="{mid + jitter:.1f}" r="2.5" '
                f'fill="{PALETTE[0]}" fill-opacity="0.55"/>'
            )
        if ordered:
            for q, name in ((50, "p50"), (95, "p95")):
                value = ordered[min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1)]
                x = x_of(value)
                body.append(
                    f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{mid - 11}" y2="{mid + 11}" '
                    f'stroke="#b5485d" stroke-width="2"><title>{name} {_number(value)} {unit}</title></line>'
                )
        y += strip
    decade = low
    while decade <= high * 1.0001:
        x = x_of(decade)
        body.append(
            f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{y}" y2="{y + 4}" stroke="#555"/>'
            f'<text x="{x:.1f}" y="{y + 16}" text-anchor="middle">{decade:g} {unit}</text>'
        )
        decade *= 10
    return _svg(width, height, body, title)


def sparkline(values: Sequence[float | None], title: str, baseline_index: int | None = None) -> str:
    """A small line over past audits (oldest left); the baseline audit is ringed."""
    width, height, pad = 150, 34, 4
    points = [(i, v) for i, v in enumerate(values) if v is not None]
    body = []
    if not points:
        return _svg(width, height, ['<text x="4" y="20" fill="#777">n/a</text>'], title, False)
    lowest = min(v for _, v in points)
    highest = max(v for _, v in points)
    spread = (highest - lowest) or 1.0
    count = max(len(values) - 1, 1)

    def xy(i: int, v: float) -> tuple[float, float]:
        return (
            pad + (width - 2 * pad) * i / count,
            height - pad - (height - 2 * pad) * (v - lowest) / spread,
        )

    path = " ".join(
        f"{'M' if k == 0 else 'L'}{x:.1f} {y:.1f}"
        for k, (x, y) in enumerate(xy(i, v) for i, v in points)
    )
    body.append(f'<path d="{path}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for i, v in points:
        x, y = xy(i, v)
        ring = i == baseline_index
        body.append(
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{3.5 if ring else 2}" '
            f'fill="{"#fff" if ring else PALETTE[0]}" stroke="{PALETTE[0]}">'
            f"<title>{_number(v)}{' (baseline)' if ring else ''}</title></circle>"
        )
    return _svg(width, height, body, title, False)
