"""Numbers as a person reads them, for the terminal and the report alike."""

from __future__ import annotations

import math

__all__ = ["format_duration_ms", "format_number", "format_share"]


def format_duration_ms(value: float | None) -> str:
    """Milliseconds as a person reads them: "840 ms", "76.6 s", "12 min 5 s"."""
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) < 1000:
        return f"{value:.0f} ms"
    seconds = value / 1000
    if seconds < 600:
        return f"{seconds:.3g} s" if seconds < 100 else f"{seconds:.0f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def format_number(value: float | None, digits: int = 3) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}g}"


def format_share(value: float | None) -> str:
    """A share as a percentage to one decimal ("38.5%"); "n/a" where there is none."""
    return "n/a" if value is None or math.isnan(value) else f"{value:.1%}"
