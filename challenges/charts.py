"""Plotly figures of the plan, built here and handed to the pages as JSON (`json_script`)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import plotly.graph_objects as go
from plotly import colors

from .models import Activity

_PALETTE = colors.qualitative.Plotly


def clock_gantt(*, activities: Iterable[Activity], now: datetime, start: datetime, end: datetime) -> dict[str, Any]:
    """The activities as bars on the shared clock, one colour per experiment, with a vertical "now" line (UTC).

    Plain horizontal bars with a date base rather than plotly.express.timeline, which would need pandas.
    """
    by_experiment: dict[str, list[Activity]] = {}
    for activity in activities:
        by_experiment.setdefault(activity.experiment.name, []).append(activity)
    figure = go.Figure()
    names: list[str] = []
    for index, (experiment, rows) in enumerate(sorted(by_experiment.items(), key=lambda item: item[0].lower())):
        names.extend(activity.name for activity in rows)
        figure.add_trace(
            go.Bar(
                name=experiment,
                orientation="h",
                y=[activity.name for activity in rows],
                base=[activity.start.isoformat() for activity in rows],
                x=[(activity.end - activity.start).total_seconds() * 1000 for activity in rows],
                marker_color=_PALETTE[index % len(_PALETTE)],
                customdata=[
                    [activity.mode, activity.kind, f"{activity.start:%Y-%m-%d %H:%M}", f"{activity.end:%Y-%m-%d %H:%M}"]
                    for activity in rows
                ],
                hovertemplate="%{y}<br>%{customdata[0]} (%{customdata[1]})<br>"
                "%{customdata[2]} → %{customdata[3]} UTC<extra>" + experiment + "</extra>",
            )
        )
    figure.add_shape(
        type="line",
        x0=now.isoformat(),
        x1=now.isoformat(),
        y0=0,
        y1=1,
        yref="paper",
        line={"color": "#c0392b", "width": 2, "dash": "dot"},
    )
    figure.add_annotation(
        x=now.isoformat(), y=1, yref="paper", text="now", showarrow=False, yanchor="bottom", font={"color": "#c0392b"}
    )
    figure.update_layout(
        barmode="overlay",
        height=max(250, 90 + 28 * len(names)),
        # The label of the challenge's last day is centred on the right edge: without room for its half, Plotly
        # drops it (its labels are hidden past the figure's edge, and automargin does not count that one). The
        # legend sits at the foot of the figure, below the dates and their year, not over them.
        margin={"l": 10, "r": 40, "t": 30, "b": 70},
        legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
        xaxis={"type": "date", "range": [start.isoformat(), end.isoformat()], "title": {"text": "UTC"}},
        yaxis={"categoryorder": "array", "categoryarray": list(reversed(names)), "automargin": True},
        plot_bgcolor="#fff",
    )
    result: dict[str, Any] = json.loads(figure.to_json())
    return result
