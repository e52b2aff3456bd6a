"""Every table of the portal as CSV or JSON, one way: `?format=csv|json` on the page that shows it.

CSV cells are formula-safe (OWASP "CSV injection"): a text cell that a spreadsheet would read as a formula (it
begins with =, +, -, @, a tab or a carriage return) gets a leading single quote; numbers stay numbers. Lists are
joined by "; ", empty cells are empty, times are ISO 8601 UTC. JSON keeps lists, nulls and numbers as they are:
{"table": name, "columns": [...], "rows": [...]}.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse

from .times import iso_utc, iso_values

FORMATS = ("csv", "json")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def export_requested(request: HttpRequest) -> bool:
    """The page was asked for its table (?format=csv or ?format=json)."""
    return request.GET.get("format") in FORMATS


def csv_cell(value: Any) -> Any:
    """One CSV cell: lists joined, times ISO 8601 UTC, None empty, formula-like text quoted."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, list | tuple):
        value = "; ".join("" if item is None else str(item) for item in value)
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def table_response(
    request: HttpRequest,
    *,
    name: str,
    columns: Sequence[str],
    rows: Sequence[dict[str, Any]],
    json_rows: Sequence[dict[str, Any]] | None = None,
    about: dict[str, Any] | None = None,
) -> HttpResponse:
    """The table as CSV (?format=csv) or JSON (?format=json). `json_rows`, when given, is the JSON's rows in a shape
    of their own (the API's) instead of the flat rows. `about`: keys the JSON gives beside the table (what its
    numbers are, e.g. the matrix's resolution)."""
    if request.GET.get("format") == "json":
        if json_rows is not None:
            return JsonResponse({"table": name, **(about or {}), "rows": [iso_values(row) for row in json_rows]})
        body = {"table": name, **(about or {}), "columns": list(columns), "rows": [iso_values(row) for row in rows]}
        return JsonResponse(body)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    writer = csv.writer(response)
    writer.writerow(columns)
    for row in rows:
        writer.writerow([csv_cell(row.get(column)) for column in columns])
    return response


class _Echo:
    def write(self, value: str) -> str:
        return value


def table_stream_response(
    request: HttpRequest, *, name: str, columns: Sequence[str], rows: Iterable[dict[str, Any]]
) -> StreamingHttpResponse:
    """table_response for tables too large to hold: the rows are written as they come."""
    if request.GET.get("format") == "json":
        return StreamingHttpResponse(_json_lines(name, columns, rows), content_type="application/json")
    response = StreamingHttpResponse(_csv_lines(columns, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}.csv"'
    return response


def _csv_lines(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    writer = csv.writer(_Echo())
    yield writer.writerow(columns)
    for row in rows:
        yield writer.writerow([csv_cell(row.get(column)) for column in columns])


def _json_lines(name: str, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    yield json.dumps({"table": name, "columns": list(columns)})[:-1] + ', "rows": ['
    for index, row in enumerate(rows):
        yield ("," if index else "") + json.dumps(iso_values(row))
    yield "]}"
