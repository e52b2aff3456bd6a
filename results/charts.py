"""Plotly figures of the results, built here from selector output and handed to the pages as JSON
(`json_script`). Rates are drawn in GB/s (10^9 bytes per second); times are UTC."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go

from common.times import iso_utc

from .markers import PlotMark
from .selectors import RateSeries, ThroughputStats
from .targets.rates import TargetRates

GB = 1e9
ACHIEVED = "#0b5cad"
TARGET = "#c0392b"
STABLE = "#2e7d32"
PEAK = "#b26a00"
OUTAGE = "#7f1d1d"
ALERT = "#e67e00"


@dataclass(frozen=True)
class OutageWindow:
    """An outage a site reported, as the rate plot draws it."""

    site: str
    start: datetime
    end: datetime
    reason: str

    @property
    def hover(self) -> str:
        return f"{self.site} outage {self.start:%Y-%m-%d %H:%M} → {self.end:%Y-%m-%d %H:%M} UTC: {self.reason}"


def _as_json(figure: go.Figure) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(figure.to_json())
    return result


def _window_band(*, figure: go.Figure, name: str, start: datetime, seconds: int, color: str, filled: bool) -> None:
    """A vertical band over [start, start + seconds), labelled at its top."""
    end = start + timedelta(seconds=seconds)
    figure.add_shape(
        type="rect",
        name=name,
        x0=iso_utc(start),
        x1=iso_utc(end),
        y0=0,
        y1=1,
        yref="paper",
        layer="below",
        fillcolor=color if filled else "rgba(0,0,0,0)",
        opacity=0.15 if filled else 1,
        line={"color": color, "width": 0 if filled else 1.5, "dash": "dot"},
    )
    figure.add_annotation(
        x=iso_utc(start + (end - start) / 2),
        y=1,
        yref="paper",
        text=name,
        showarrow=False,
        yanchor="bottom",
        font={"color": color, "size": 12},
    )


@dataclass(frozen=True)
class HoverSpan:
    """A span the rate plot shades, with what it was on hover: an outage a site reported, an alert of the target."""

    start: datetime
    end: datetime
    text: str
    short: str = ""  # the shape's name after the span's: the reason alone


def _hover_spans(
    *, figure: go.Figure, spans: Sequence[HoverSpan], start: datetime, end: datetime, name: str, color: str
) -> None:
    """Each span (clipped to the plot) shaded, and over it an invisible trace on a hidden [0, 1] axis that carries
    its text: Plotly shapes have no hover, traces do."""
    for index, span in enumerate(spans):
        low, high = max(span.start, start), min(span.end, end)
        if high <= low:
            continue
        figure.add_shape(
            type="rect",
            name=f"{name}: {span.short or span.text}"[:200],
            x0=iso_utc(low),
            x1=iso_utc(high),
            y0=0,
            y1=1,
            yref="paper",
            layer="below",
            fillcolor=color,
            opacity=0.18,
            line={"width": 0},
        )
        # Points every few minutes across the span, so that "x unified" hover finds one wherever the pointer is.
        step = max((high - low) / 48, timedelta(minutes=1))
        moments = [low + step * n for n in range(int((high - low) / step) + 1)] + [high]
        figure.add_trace(
            go.Scatter(
                name=name if index == 0 else f"{name} {index + 1}",
                legendgroup=f"{name}s",
                showlegend=index == 0,
                x=[iso_utc(moment) for moment in moments],
                y=[1] * len(moments),
                yaxis="y2",
                mode="lines",
                line={"color": color, "width": 0},
                fill="tozeroy",
                fillcolor="rgba(0,0,0,0)",
                text=[span.text] * len(moments),
                hovertemplate="%{text}<extra></extra>",
            )
        )


def _window_traces(*, figure: go.Figure, rates: TargetRates, stable_window: int, max_window: int) -> None:
    """The stable window as a shaded band with its rate, the max window outlined with its rate."""
    if rates.stable_window_start is not None and rates.stable_rate is not None:
        _window_band(
            figure=figure,
            name="stable window",
            start=rates.stable_window_start,
            seconds=stable_window,
            color=STABLE,
            filled=True,
        )
        stable_end = rates.stable_window_start + timedelta(seconds=stable_window)
        figure.add_trace(
            go.Scatter(
                name="stable rate",
                x=[iso_utc(rates.stable_window_start), iso_utc(stable_end)],
                y=[rates.stable_rate / GB] * 2,
                mode="lines",
                line={"color": STABLE, "width": 2.5},
                hovertemplate="stable %{y:.3g} GB/s<extra></extra>",
            )
        )
    if rates.max_window_start is not None:
        _window_band(
            figure=figure, name="max window", start=rates.max_window_start, seconds=max_window, color=PEAK, filled=False
        )
        max_end = rates.max_window_start + timedelta(seconds=max_window)
        figure.add_trace(
            go.Scatter(
                name="max rate",
                x=[iso_utc(rates.max_window_start), iso_utc(max_end)],
                y=[rates.max_rate / GB] * 2,
                mode="lines",
                line={"color": PEAK, "width": 2.5},
                hovertemplate="max %{y:.3g} GB/s<extra></extra>",
            )
        )


def target_rate_figure(
    *,
    rates: TargetRates,
    series: RateSeries,
    stable_window: int,
    max_window: int,
    outages: Sequence[OutageWindow] = (),
    marks: Sequence[PlotMark] = (),
) -> dict[str, Any]:
    """The achieved rate of one target over its activity, as a step line of the bins' mean rates, with the target
    as a horizontal line, the stable window as a shaded band (and its rate over it), the max window outlined, the
    outages that the sites reported as dark-red spans with their reason on hover, and the marks of the apps above
    (the target's alerts) as orange spans."""
    figure = go.Figure()
    start, end = iso_utc(rates.start), iso_utc(rates.end)
    if series.starts:
        figure.add_trace(
            go.Scatter(
                name=f"achieved ({series.bin_minutes}-minute means)",
                x=[iso_utc(moment) for moment in series.starts] + [iso_utc(series.ends[-1])],
                y=[rate / GB for rate in series.rates] + [series.rates[-1] / GB],
                mode="lines",
                line={"color": ACHIEVED, "width": 1.5, "shape": "hv"},
                hovertemplate="%{x|%Y-%m-%d %H:%M} UTC<br>%{y:.3g} GB/s<extra></extra>",
            )
        )
    figure.add_trace(
        go.Scatter(
            name="target",
            x=[start, end],
            y=[rates.target.rate / GB] * 2,
            mode="lines",
            line={"color": TARGET, "width": 2, "dash": "dash"},
            hovertemplate="target %{y:.3g} GB/s<extra></extra>",
        )
    )
    figure.add_trace(
        go.Scatter(
            name="average",
            x=[start, end],
            y=[rates.average_rate / GB] * 2,
            mode="lines",
            line={"color": "#555", "width": 1, "dash": "dot"},
            hovertemplate="average %{y:.3g} GB/s<extra></extra>",
        )
    )
    _window_traces(figure=figure, rates=rates, stable_window=stable_window, max_window=max_window)
    spans = [HoverSpan(outage.start, outage.end, outage.hover, outage.reason) for outage in outages]
    _hover_spans(figure=figure, spans=spans, start=rates.start, end=rates.end, name="outage", color=OUTAGE)
    alerts = [HoverSpan(mark.start, mark.end or rates.end, mark.label) for mark in marks]
    _hover_spans(figure=figure, spans=alerts, start=rates.start, end=rates.end, name="alert", color=ALERT)
    figure.update_layout(
        height=420,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        legend={"orientation": "h", "y": -0.18},
        xaxis={"type": "date", "range": [start, end], "title": {"text": "UTC"}},
        yaxis={"title": {"text": "GB/s"}, "rangemode": "tozero", "automargin": True},
        plot_bgcolor="#fff",
        hovermode="x unified",
    )
    if outages or marks:
        figure.update_layout(yaxis2={"overlaying": "y", "range": [0, 1], "visible": False, "fixedrange": True})
    return _as_json(figure)


@dataclass(frozen=True)
class OneValueBins:
    """How a histogram of samples that all hold one value is drawn: one bin a tenth of the value wide (1 for zero),
    centred on it, on an axis from zero to twice the value (and to the lines drawn with it)."""

    xbins: dict[str, float]
    x_range: list[float]


def one_value_bins(values: Sequence[float], *, lines: Sequence[float] = ()) -> OneValueBins | None:
    """Plotly bins one distinct value as [n, n + 1) whatever its scale: 9.4 GB/s becomes a bar from 9 to 10 against
    the axis' edge, 0.0001 one from -0.5 to 0.5 over the whole axis. None for no sample or two values or more (its
    own bins are right for them)."""
    if len(set(values)) != 1:
        return None
    value = values[0]
    width = abs(value) / 10 or 1.0
    low = min(0.0, value - width, *lines)
    high = max(0.0, 2 * value, value + width, *(line * 1.05 for line in lines))
    return OneValueBins(
        xbins={"start": value - width / 2, "end": value + width / 2, "size": width}, x_range=[low, high]
    )


def throughput_histogram(*, series: RateSeries, stats: ThroughputStats, target_rate: float) -> dict[str, Any]:
    """How often each throughput occurred: a histogram of the mean rates of the bins that moved data (an idle bin is
    no sample of the link), with the mean and the target as vertical lines."""
    samples = [rate / GB for rate in series.rates if rate > 0]
    one = one_value_bins(samples, lines=[target_rate / GB, *([stats.mean / GB] if stats.mean is not None else [])])
    figure = go.Figure(
        go.Histogram(
            name=f"{series.bin_minutes}-minute means",
            x=samples,
            xbins=one.xbins if one else None,
            marker_color=ACHIEVED,
            hovertemplate="%{x} GB/s: %{y} bins<extra></extra>",
        )
    )
    # The two labels on two heights: a mean close to the target would otherwise print over it.
    lines = [("target", target_rate, TARGET, "dash", 1.0)]
    if stats.mean is not None:
        lines.append(("mean", stats.mean, "#555", "dot", 0.9))
    for name, rate, color, dash, height in lines:
        figure.add_shape(
            type="line",
            name=name,
            x0=rate / GB,
            x1=rate / GB,
            y0=0,
            y1=1,
            yref="paper",
            line={"color": color, "width": 2, "dash": dash},
        )
        figure.add_annotation(
            x=rate / GB,
            y=height,
            yref="paper",
            text=name,
            showarrow=False,
            yanchor="bottom",
            bgcolor="rgba(255,255,255,0.8)",
            font={"color": color},
        )
    figure.update_layout(
        height=320,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        showlegend=False,
        bargap=0.05,
        xaxis={"title": {"text": "GB/s"}, "rangemode": "tozero", **({"range": one.x_range} if one else {})},
        yaxis={"title": {"text": f"{series.bin_minutes}-minute bins"}, "automargin": True},
        plot_bgcolor="#fff",
    )
    return _as_json(figure)
