"""The report's figures as PNG images, drawn on the server with matplotlib (its Agg canvas, no display) from the
figures' data in the content (rates in GB/s = 10^9 B/s on the axes, times UTC). The same data give the same
bytes: no time is written into the image."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from typing import Any

import matplotlib.dates as mdates
from matplotlib.figure import Figure  # drawn without pyplot: no display, no global state

WIDTH, HEIGHT, DPI = 8.0, 3.2, 110  # inches, dots per inch: 880 x 352 pixels, readable on an A4 page
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
PNG_METADATA = {"Software": None}  # nothing that changes with the library's version or the time


def _time(value: Any) -> datetime:
    return value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def _axes_time(axes: Any, start: Any, end: Any) -> None:
    axes.set_xlim(_time(start), _time(end))
    locator = mdates.AutoDateLocator(minticks=4, maxticks=9)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    axes.set_xlabel("time (UTC)")
    axes.grid(True, color="#ddd", linewidth=0.6)


def _rate_plot(axes: Any, data: dict[str, Any]) -> None:
    for index, series in enumerate(data["series"]):
        colour = COLOURS[index % len(COLOURS)]
        times = [_time(moment) for moment in series["times"]]
        rates = [rate / 1e9 for rate in series["rates"]]
        axes.step(times, rates, where="post", color=colour, linewidth=1.3, label=series["label"])
        axes.axhline(series["target_rate"] / 1e9, color=colour, linestyle="--", linewidth=1.0)
    axes.set_ylabel("GB/s (dashed: target)")
    axes.set_ylim(bottom=0)
    _axes_time(axes, data["start"], data["end"])


def _failures_plot(axes: Any, data: dict[str, Any]) -> None:
    """Failures per hour stacked by category, drawn as filled steps (one polygon a category: a month of hours stays
    as fast to draw as a day)."""
    seen = sorted({_time(hour) for stack in data["stacks"] for hour in stack["hours"]})
    # Every hour from the first to the last with failures, those without at zero (a step does not bridge a gap).
    count = int((seen[-1] - seen[0]).total_seconds() // 3600) + 1 if seen else 0
    hours = [seen[0] + timedelta(hours=index) for index in range(count)]
    edges = [*hours, hours[-1] + timedelta(hours=1)] if hours else []
    below = [0.0] * len(hours)
    for index, stack in enumerate(data["stacks"]):
        counts = dict(zip((_time(hour) for hour in stack["hours"]), stack["failures"], strict=True))
        above = [low + counts.get(hour, 0) for low, hour in zip(below, hours, strict=True)]
        axes.fill_between(
            edges,
            [*below, below[-1]],
            [*above, above[-1]],
            step="post",
            linewidth=0,
            color=COLOURS[index % len(COLOURS)],
            label=stack["label"],
        )
        below = above
    axes.set_ylabel("failed transfers per hour")
    axes.set_ylim(bottom=0)
    _axes_time(axes, data["start"], data["end"])


def figure_png(data: dict[str, Any]) -> bytes:
    """One figure of the content as PNG bytes."""
    figure = Figure(figsize=(WIDTH, HEIGHT), dpi=DPI)
    axes = figure.add_subplot()
    (_rate_plot if data["kind"] == "rate" else _failures_plot)(axes, data)
    axes.set_title(data["title"], fontsize=10, loc="left")
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8, loc="upper right", framealpha=0.85)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="png", metadata=PNG_METADATA)
    return out.getvalue()


def figures_png(content: dict[str, Any]) -> dict[str, bytes]:
    """Every figure of the content: name -> PNG bytes."""
    return {name: figure_png(data) for name, data in content.get("figures", {}).items()}
