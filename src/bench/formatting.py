"""Numbers for people: latencies, ratios and counts as the report and the console print them."""

from __future__ import annotations


def fmt_us(us: float | None) -> str:
    """A latency for people: µs, ms or s."""
    if us is None:
        return "–"
    if us < 1_000:
        return f"{us:.0f} µs"
    if us < 1_000_000:
        return f"{us / 1_000:.3g} ms"
    return f"{us / 1_000_000:.3g} s"


def fmt_ratio(value: float | None) -> str:
    """A ratio as ``0.42×``."""
    return "–" if value is None else f"{value:.2f}×"


def fmt_num(value: float | None, digits: int = 2) -> str:
    """A number without trailing zeros."""
    if value is None:
        return "–"
    text = f"{value:,.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
