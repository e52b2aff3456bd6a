"""The CSV renderer of the injection plans: `?format=csv` gives the file Rucio's CLI imports."""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

from challenges.injection import RUCIO_CSV_COLUMNS
from common.exports import csv_cell


class InjectionPlansCsvRenderer(BaseRenderer):
    """Rows of `challenges.injection.injection_csv_rows` as CSV with Rucio's header, formula-safe; an error's
    detail as one line of text."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if isinstance(data, Mapping):  # an error: {"detail": "..."}
            return str(data.get("detail", data)).encode()
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(RUCIO_CSV_COLUMNS)
        for row in data or []:
            writer.writerow([csv_cell(row.get(column)) for column in RUCIO_CSV_COLUMNS])
        return buffer.getvalue().encode()
