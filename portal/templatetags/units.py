"""Units on the pages: rates are bytes per second inside the code; pages show GB/s (10^9 B/s) for storage and
Gb/s for networks, sizes in SI bytes."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def gbytes_per_s(rate: float | None) -> str:
    """Bytes per second as GB/s (10^9 B/s), three significant figures; an em dash when unknown."""
    if rate is None:
        return "—"
    return f"{rate / 1e9:.3g} GB/s"


@register.filter
def gbits_per_s(rate: float | None) -> str:
    """Bytes per second as a network rate in Gb/s (10^9 bit/s)."""
    if rate is None:
        return "—"
    return f"{rate * 8 / 1e9:.3g} Gb/s"


@register.filter
def si_bytes(size: float | None) -> str:
    """A size in bytes with an SI prefix (kB, MB, GB, TB, PB, EB)."""
    if size is None:
        return "—"
    value = float(size)
    for unit in ("B", "kB", "MB", "GB", "TB", "PB"):
        if abs(value) < 1000:
            return f"{value:.3g} {unit}"
        value /= 1000
    return f"{value:.3g} EB"
