"""A Plotly figure as the JSON a page hands to Plotly (json_script), for the kinds' run page figures."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go


def figure_json(figure: go.Figure) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(figure.to_json())
    return result
