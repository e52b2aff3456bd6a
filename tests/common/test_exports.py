"""The one export helper: CSV that spreadsheets cannot run, JSON with its types, ISO 8601 UTC times."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta, timezone

from django.test import RequestFactory

from common.exports import csv_cell, table_response
from common.times import iso_utc

ROWS = [
    {"site": '=HYPERLINK("http://x")', "rate": -5, "note": "-1+2", "hosts": ["a", "b"], "when": None},
    {"site": "@SUM(A1)", "rate": 1.5e9, "note": "+x", "hosts": [], "when": datetime(2026, 1, 2, 3, 4, tzinfo=UTC)},
    {"site": "CERN", "rate": 0, "note": "\tTAB", "hosts": ["c"], "when": None},
]
COLUMNS = ["site", "rate", "note", "hosts", "when"]


def export(format: str) -> bytes:
    request = RequestFactory().get("/x/", {"format": format})
    return table_response(request, name="t", columns=COLUMNS, rows=ROWS).content


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted_and_numbers_stay_numbers() -> None:
    rows = list(csv.reader(io.StringIO(export("csv").decode())))
    assert rows[0] == COLUMNS
    assert [row[0] for row in rows[1:]] == ['\'=HYPERLINK("http://x")', "'@SUM(A1)", "CERN"]
    assert [row[1] for row in rows[1:]] == ["-5", "1500000000.0", "0"]
    assert [row[2] for row in rows[1:]] == ["'-1+2", "'+x", "'\tTAB"]
    assert [row[3] for row in rows[1:]] == ["a; b", "", "c"]
    assert [row[4] for row in rows[1:]] == ["", "2026-01-02T03:04:00Z", ""]


def test_json_keeps_lists_nulls_and_numbers_with_times_in_utc() -> None:
    body = json.loads(export("json"))
    assert body["table"] == "t" and body["columns"] == COLUMNS
    assert body["rows"][0] == {
        "site": '=HYPERLINK("http://x")',
        "rate": -5,
        "note": "-1+2",
        "hosts": ["a", "b"],
        "when": None,
    }
    assert body["rows"][1]["when"] == "2026-01-02T03:04:00Z"


def test_a_list_with_a_formula_is_quoted_once_joined() -> None:
    assert csv_cell(["=1", "2"]) == "'=1; 2"


def test_times_are_written_in_utc_whatever_their_zone() -> None:
    assert iso_utc(datetime(2026, 1, 2, 5, 0, tzinfo=timezone(timedelta(hours=2)))) == "2026-01-02T03:00:00Z"
    assert iso_utc(None) is None


def test_numbers_on_pages_have_three_significant_digits_and_never_e_notation() -> None:
    from common.units import gigabytes_per_second_text, rate_text, significant, size_text

    assert [significant(v) for v in (1234, 1.5, 54.0, 0.000123, 999.6, 0)] == [
        "1230",
        "1.5",
        "54",
        "0.000123",
        "1000",
        "0",
    ]
    assert rate_text(8.27e2) == "827 B/s" and rate_text(7.03e7) == "70.3 MB/s" and rate_text(1.25e9) == "1.25 GB/s"
    assert size_text(54e12) == "54 TB"
    assert "e-" not in gigabytes_per_second_text(827.0)
