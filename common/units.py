"""Numbers as people read them: three significant digits, never e-notation; rates auto-scaled (B/s .. GB/s, 10^3
steps) for storage and Gb/s for networks; sizes in SI bytes. Inside the code and the API rates stay bytes/s."""

from __future__ import annotations

import math

RATE_UNITS = ("B/s", "kB/s", "MB/s", "GB/s", "TB/s")
BIT_RATE_UNITS = ("b/s", "kb/s", "Mb/s", "Gb/s", "Tb/s", "Pb/s")
SIZE_UNITS = ("B", "kB", "MB", "GB", "TB", "PB", "EB")
EMPTY = "—"


def significant(value: float, digits: int = 3) -> str:
    """`value` with at most `digits` significant digits in plain notation, as %g without its e-notation (1234 ->
    "1230", 1.5 -> "1.5", 0.000123 -> "0.000123")."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = math.floor(math.log10(abs(value)))
    rounded = round(value, digits - 1 - magnitude)
    if rounded and math.floor(math.log10(abs(rounded))) > magnitude:  # 999.6 rounds up to 1000
        magnitude += 1
    decimals = max(0, digits - 1 - magnitude)
    text = f"{rounded:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text  # like %g: 1.50 -> 1.5, 54.0 -> 54


def _number(value: object) -> float | None:
    """A number to show, or None for what is not one (None, and the "" a template gives for a missing field)."""
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _scaled(value: float, units: tuple[str, ...]) -> str:
    index = 0
    while abs(value) >= 999.5 and index < len(units) - 1:
        value /= 1000
        index += 1
    return f"{significant(value)} {units[index]}"


def rate_text(rate: object) -> str:
    """Bytes per second, auto-scaled: "512 B/s", "70.3 MB/s", "1.25 GB/s"; an em dash when unknown."""
    number = _number(rate)
    return EMPTY if number is None else _scaled(number, RATE_UNITS)


def size_text(size: object) -> str:
    """Bytes with an SI prefix: "320 MB"."""
    number = _number(size)
    return EMPTY if number is None else _scaled(number, SIZE_UNITS)


def gigabytes_per_second_text(rate: object) -> str:
    """Bytes per second as GB/s (10^9 B/s), for tables whose column is in GB/s."""
    number = _number(rate)
    return EMPTY if number is None else f"{significant(number / 1e9)} GB/s"


def gigabits_per_second_text(rate: object) -> str:
    """Bytes per second as a network rate in Gb/s (10^9 bit/s); a site without a capacity has none."""
    number = _number(rate)
    return EMPTY if number is None else f"{significant(number * 8 / 1e9)} Gb/s"


def bits_per_second_text(rate: object) -> str:
    """Bytes per second as a network rate, auto-scaled in bits: "800 Mb/s", "10 Tb/s"; an em dash when unknown."""
    number = _number(rate)
    return EMPTY if number is None else _scaled(number * 8, BIT_RATE_UNITS)


def percent_text(ratio: object) -> str:
    """A ratio (0.125) as a percentage, "12.5 %"; an em dash when unknown."""
    number = _number(ratio)
    return "—" if number is None else f"{significant(number * 100)} %"


def duration_text(seconds: float | None) -> str:
    """A duration as people read it (an ETA, the time a probe has run): "45 s", "3 min 20 s", "2 h 05 min"; an em
    dash when unknown."""
    if seconds is None:
        return EMPTY
    total = max(round(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def window_text(seconds: int) -> str:
    """A window's length as people say it, in its largest whole unit: "5 h", "90 min", "45 s"."""
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"


def is_whole_number(text: str) -> bool:
    """Whether text (a query parameter, a form word) is a whole number int() reads: ASCII digits only. str.isdigit()
    is also true of "²" and other digits int() refuses, which would end a request in a 500."""
    return text.isascii() and text.isdigit()
