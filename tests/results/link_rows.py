"""The matrix's stored unions (results.store.link_intervals) in one comparable form, for tests that check what a writer
left in them against a rebuild from the records."""

from __future__ import annotations

from typing import Any

from results.models import LinkError, LinkInterval, LinkTotals
from results.store.link_intervals import link_intervals_rebuild

KEY = ("activity_id", "source_site_id", "destination_site_id", "mode", "concurrency")


def link_rows() -> dict[str, list[tuple[Any, ...]]]:
    """Every row of the three tables (runs sorted), in one order."""
    totals = [
        (*row[:-1], sorted(row[-1]))
        for row in LinkTotals.objects.values_list(
            *KEY, "volume", "files_ok", "files_failed", "sum_of_file_rates", "runs"
        )
    ]
    return {
        "totals": sorted(totals, key=repr),
        "intervals": sorted(LinkInterval.objects.values_list(*KEY, "start", "end"), key=repr),
        "errors": sorted(LinkError.objects.values_list(*KEY, "message", "failures"), key=repr),
    }


def assert_unions_as_rebuilt() -> None:
    """The unions kept as records were stored and moved equal those rebuilt from the records, row for row."""
    kept = link_rows()
    link_intervals_rebuild()
    assert kept == link_rows()
