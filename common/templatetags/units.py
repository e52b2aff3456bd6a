"""Units on the pages (common.units): rates are bytes per second inside the code; pages show them auto-scaled
(B/s .. GB/s) or in GB/s (10^9 B/s) for storage and Gb/s for networks, sizes in SI bytes, three significant
digits and never e-notation."""

from __future__ import annotations

from django import template

from common.units import gigabits_per_second_text, gigabytes_per_second_text, percent_text, rate_text, size_text

register = template.Library()


@register.filter
def rate(value: float | None) -> str:
    """Bytes per second, auto-scaled: "70.3 MB/s"; an em dash when unknown."""
    return rate_text(value)


@register.filter
def gbytes_per_s(value: float | None) -> str:
    """Bytes per second as GB/s (10^9 B/s), three significant figures; an em dash when unknown."""
    return gigabytes_per_second_text(value)


@register.filter
def gbits_per_s(value: float | None) -> str:
    """Bytes per second as a network rate in Gb/s (10^9 bit/s)."""
    return gigabits_per_second_text(value)


@register.filter
def si_bytes(value: float | None) -> str:
    """A size in bytes with an SI prefix (kB, MB, GB, TB, PB, EB)."""
    return size_text(value)


@register.filter
def percent(value: float | None) -> str:
    """A ratio (0.125) as a percentage ("12.5 %"); an em dash when unknown."""
    return percent_text(value)
