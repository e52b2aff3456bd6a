"""Results pages, mounted at /results/: the challenges, target versus achieved of one (with its definitions),
the rate of one target over time with the histogram of its throughput, and the comparison with an earlier
challenge. Every table exports as ?format=csv or ?format=json; rates are bytes per second in the exports and
GB/s on the pages. Readers who are DDM services see the rows of their own experiment only, as in the API."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import NoReverseMatch, reverse

from challenges.models import Challenge, Target
from challenges.selectors import challenge_for
from challenges.views import PLOTLY_VERSION, read_access
from common.exports import export_requested, table_response
from common.times import iso_utc
from common.units import is_whole_number, size_text, window_text
from reports.selectors import ReportMarker, outages_overlapping, report_markers

from . import charts, selectors
from .markers import target_marks
from .store.attribution import attribution_status
from .targets.figures import figures_row
from .targets.rates import TargetRates

FILTERS = ("experiment", "activity", "site")
COMPARE_FILTERS = ("experiment", "site")


# --- exports --------------------------------------------------------------------------------------------------


RATE_COLUMNS = [
    "id",
    "activity",
    "experiment",
    "mode",
    "kind",
    "site",
    "link_from",
    "link_to",
    "direction",
    "window_start",
    "window_end",
    "window_ended",
    "at",
    "measured_by",
    "target_rate",
    "volume",
    "average_rate",
    "max_rate",
    "stable_rate",
    "last_15min_rate",
    "last_hour_rate",
    "required_rate",
    "projected_average_rate",
    "files_ok",
    "files_failed",
    "failure_ratio",
    "verdict",
    "runs_outside_window",
    "network_runs",
    "network_latest_rate",
    "network_latest_at",
    "network_best_rate",
    "network_best_at",
    "url",
]


def _flat(row: dict[str, Any]) -> dict[str, Any]:
    """A row of figures_row as CSV columns: the link's ends and a network target's measurements as columns of their
    own; `so_far` is left out (its figures are the row's own while the window runs)."""
    flat = {key: value for key, value in row.items() if key not in ("link", "network", "so_far")}
    link = row.get("link") or {}
    flat |= {"link_from": link.get("from"), "link_to": link.get("to")}
    network = row.get("network") or {}
    latest, best = network.get("latest") or {}, network.get("best") or {}
    flat |= {
        "network_runs": network.get("runs"),
        "network_latest_rate": latest.get("rate"),
        "network_latest_at": latest.get("at"),
        "network_best_rate": best.get("rate"),
        "network_best_at": best.get("at"),
    }
    return {key: iso_utc(value) if isinstance(value, datetime) else value for key, value in flat.items()}


def _filters(request: HttpRequest, names: Sequence[str]) -> dict[str, str | None]:
    return {name: request.GET.get(name, "").strip() or None for name in names}


def _query(filters: dict[str, str | None]) -> str:
    return urlencode({name: value for name, value in filters.items() if value})


def _windows(challenge: Challenge) -> dict[str, str]:
    return {"max_window": window_text(challenge.max_window), "stable_window": window_text(challenge.stable_window)}


def _optional_url(name: str, *args: Any) -> str | None:
    """The URL of a page another part of the portal serves, if it is routed."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


# --- what a table row shows -----------------------------------------------------------------------------------


def achievement_class(achieved: float | None, target: float) -> str:
    """The colour of a rate cell, by achieved / target: met (>= 100 %), near (>= 75 %), low (>= 50 %), far."""
    if achieved is None:
        return "r-none"
    ratio = achieved / target
    if ratio >= 1:
        return "r-met"
    if ratio >= 0.75:
        return "r-near"
    if ratio >= 0.5:
        return "r-low"
    return "r-far"


@dataclass(frozen=True)
class RateCell:
    rate: float | None
    css: str
    percent: str  # of the target


def _cell(rate: float | None, target: float) -> RateCell:
    return RateCell(
        rate=rate, css=achievement_class(rate, target), percent="" if rate is None else f"{rate / target:.0%}"
    )


@dataclass(frozen=True)
class RateRow:
    """One target's numbers as the page shows them."""

    rates: TargetRates
    average: RateCell
    peak: RateCell
    stable: RateCell
    volume: str  # TB
    url: str
    # The site reports of the row's site (or of both ends of its link) that the reader may see.
    reports: tuple[ReportMarker, ...] = ()

    @property
    def target(self) -> Target:
        return self.rates.target

    @property
    def failure_ratio(self) -> str:
        ratio = self.rates.failure_ratio
        return "—" if ratio is None else f"{ratio:.1%}"


def _row_reports(target: Target, markers: dict[str, ReportMarker]) -> tuple[ReportMarker, ...]:
    sites = [target.link_from, target.link_to] if target.is_link else [target.site]
    return tuple(markers[site.name] for site in sites if site is not None and site.name in markers)


def _rate_row(rates: TargetRates, slug: str, markers: dict[str, ReportMarker] | None = None) -> RateRow:
    target_rate = rates.target.rate
    return RateRow(
        rates=rates,
        average=_cell(rates.average_rate, target_rate),
        peak=_cell(rates.max_rate, target_rate),
        stable=_cell(rates.stable_rate, target_rate),
        volume="—" if rates.network is not None else size_text(rates.volume),
        url=reverse("results:target", args=[slug, rates.target.pk]),
        reports=_row_reports(rates.target, markers) if markers else (),
    )


# --- pages ----------------------------------------------------------------------------------------------------


@read_access
def challenge_list(request: HttpRequest) -> HttpResponse:
    """Every challenge, newest first, with links to its results."""
    challenges = Challenge.objects.select_related("compare_with").annotate(
        target_count=Count("activities__targets", distinct=True)
    )
    if export_requested(request):
        columns = ["slug", "name", "start", "end", "targets", "compare_with"]
        rows = [
            {
                "slug": c.slug,
                "name": c.name,
                "start": iso_utc(c.start),
                "end": iso_utc(c.end),
                "targets": c.target_count,
                "compare_with": c.compare_with.slug if c.compare_with else None,
            }
            for c in challenges
        ]
        return table_response(request, name="results-challenges", columns=columns, rows=rows)
    entries = [
        {
            "challenge": c,
            "matrix": _optional_url("results-matrix:matrix", c.slug),
            "failures": _optional_url("results-matrix:failures", c.slug),
            "records": _optional_url("results-matrix:records", c.slug),
            "reports": _optional_url("reports:list", c.slug),
        }
        for c in challenges
    ]
    return render(request, "results/rates_index.html", {"entries": entries})


@read_access
def challenge_rates(request: HttpRequest, slug: str) -> HttpResponse:
    """Target versus achieved: one row per target, filtered by ?experiment=, ?activity=, ?site=."""
    challenge = challenge_for(slug=slug, user=request.user, queryset=Challenge.objects.select_related("compare_with"))
    filters = _filters(request, FILTERS)
    rates = selectors.challenge_rates(challenge=challenge, user=request.user, **filters)
    if export_requested(request):
        api_rows = [figures_row(row) for row in rates]
        return table_response(
            request,
            name=f"{slug}-rates",
            columns=RATE_COLUMNS,
            rows=[_flat(row) for row in api_rows],
            json_rows=api_rows,
        )
    markers = report_markers(challenge=challenge, user=request.user)
    context = {
        "challenge": challenge,
        "rows": [_rate_row(row, slug, markers) for row in rates],
        "choices": selectors.rate_filter_choices(challenge=challenge, user=request.user),
        "filters": filters,
        "query": _query(filters),
        "windows": _windows(challenge),
        "matrix_url": _optional_url("results-matrix:matrix", slug),
        "failures_url": _optional_url("results-matrix:failures", slug),
        "reports_url": _optional_url("reports:list", slug),
        "report_count": len(markers),
        "attribution": attribution_status(),
    }
    return render(request, "results/rates_table.html", context)


@read_access
def about_numbers(request: HttpRequest) -> HttpResponse:
    """How each number is made: which records count for which activity, the rate definitions, the matrix; and the
    progress of the last re-attribution."""
    context = {
        "status": attribution_status(),
        "windows": {"max_window": "max_window", "stable_window": "stable_window"},
    }
    return render(request, "results/about_numbers.html", context)


SERIES_COLUMNS = ["start", "end", "rate"]


@read_access
def target_rates_page(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """One target over time: its rate in bins (?bin=1|5|10|60 minutes; by default by the activity's length),
    the target line, the stable and max windows, and the histogram of the bins' rates with their statistics.
    The export is the binned series."""
    target = get_object_or_404(
        Target.objects.restrict(request.user).select_related(
            "activity__challenge", "activity__experiment", "site", "link_from", "link_to"
        ),
        pk=pk,
        activity__challenge__slug=slug,
    )
    challenge = target.activity.challenge
    rates = selectors.target_figures(challenge=challenge, target=target)
    if rates.so_far is not None:  # only the minutes that have passed: the future is no idle time
        rates.series = rates.series[: rates.series_index(rates.so_far.at)]
    requested = request.GET.get("bin", "")
    bin_minutes = (
        int(requested)
        if is_whole_number(requested) and int(requested) in selectors.BIN_CHOICES
        else selectors.default_bin_minutes(duration=rates.end - rates.start)
    )
    series = selectors.rate_series(rates=rates, bin_minutes=bin_minutes)
    if export_requested(request):
        rows = [
            {"start": iso_utc(start), "end": iso_utc(end), "rate": rate}
            for start, end, rate in zip(series.starts, series.ends, series.rates, strict=True)
        ]
        return table_response(request, name=f"{slug}-target-{pk}-{bin_minutes}min", columns=SERIES_COLUMNS, rows=rows)
    # Over the bins that moved data: an idle bin is no sample of what the link did (it would put the minimum at 0).
    stats = selectors.throughput_stats(samples=[rate for rate in series.rates if rate > 0])
    site_ids = [target.link_from_id, target.link_to_id] if target.is_link else [target.site_id]
    outages = [
        charts.OutageWindow(site=outage.report.site.name, start=outage.start, end=outage.end, reason=outage.reason)
        for outage in outages_overlapping(
            challenge=challenge,
            user=request.user,
            site_ids=[pk for pk in site_ids if pk is not None],
            start=rates.start,
            end=rates.end,
        )
    ]
    marks = target_marks(target=target, user=request.user, start=rates.start, end=rates.end)
    context = {
        "challenge": challenge,
        "target": target,
        "row": _rate_row(rates, slug, report_markers(challenge=challenge, user=request.user)),
        "series": series,
        "outages": outages,
        "marks": marks,
        "stats": stats,
        "idle_bins": sum(1 for rate in series.rates if rate <= 0),
        "bin_choices": selectors.BIN_CHOICES,
        "windows": _windows(challenge),
        "stable_end": rates.stable_window_start
        and rates.stable_window_start + timedelta(seconds=challenge.stable_window),
        "max_end": rates.max_window_start and rates.max_window_start + timedelta(seconds=challenge.max_window),
        "rate_figure": charts.target_rate_figure(
            rates=rates,
            series=series,
            stable_window=challenge.stable_window,
            max_window=challenge.max_window,
            outages=outages,
            marks=marks,
        ),
        "histogram": charts.throughput_histogram(series=series, stats=stats, target_rate=target.rate),
        "plotly_version": PLOTLY_VERSION,
    }
    return render(request, "results/rates_target.html", context)


# The numbers of each side of a compared row in the CSV (keys of the API's rows).
COMPARE_SIDE = [
    "activity",
    "target_rate",
    "average_rate",
    "max_rate",
    "stable_rate",
    "volume",
    "files_ok",
    "files_failed",
    "failure_ratio",
    "verdict",
]
COMPARE_COLUMNS = [
    "experiment",
    "mode",
    "site",
    "link_from",
    "link_to",
    "direction",
    *(f"current_{column}" for column in COMPARE_SIDE),
    *(f"earlier_{column}" for column in COMPARE_SIDE),
    "ratio",
    "ratio_basis",
]


def _compared_json(row: selectors.ComparedRow) -> dict[str, Any]:
    either = row.current or row.earlier
    assert either is not None
    key = {k: v for k, v in figures_row(either).items() if k in ("experiment", "mode", "site", "link", "direction")}
    return key | {
        "current": figures_row(row.current) if row.current else None,
        "earlier": figures_row(row.earlier) if row.earlier else None,
        "ratio": row.ratio,
        "ratio_basis": row.basis,
    }


def _compared_flat(row: dict[str, Any]) -> dict[str, Any]:
    flat = _flat({k: v for k, v in row.items() if k not in ("current", "earlier")})
    for side in ("current", "earlier"):
        values = row[side] or {}
        flat |= {f"{side}_{column}": values.get(column) for column in COMPARE_SIDE}
    return flat


@read_access
def challenge_compare(request: HttpRequest, slug: str) -> HttpResponse:
    """The rows of this challenge beside those of the one it compares with, matched by experiment, mode, site or
    link and direction, with the ratio of the stable rates (of the averages when either lacks one). Rows without
    a match are shown on their own side. ?experiment= and ?site= filter both challenges."""
    challenge = challenge_for(slug=slug, user=request.user, queryset=Challenge.objects.select_related("compare_with"))
    earlier_challenge = challenge.compare_with
    if earlier_challenge is None:
        raise Http404("this challenge is not set to compare with an earlier one")
    filters = _filters(request, COMPARE_FILTERS)
    rows = selectors.rates_compare(
        current=selectors.challenge_rates(challenge=challenge, user=request.user, **filters),
        earlier=selectors.challenge_rates(challenge=earlier_challenge, user=request.user, **filters),
    )
    if export_requested(request):
        json_rows = [_compared_json(row) for row in rows]
        return table_response(
            request,
            name=f"{slug}-compare-{earlier_challenge.slug}",
            columns=COMPARE_COLUMNS,
            rows=[_compared_flat(row) for row in json_rows],
            json_rows=json_rows,
        )
    context = {
        "challenge": challenge,
        "earlier": earlier_challenge,
        "rows": [
            {
                "current": _rate_row(row.current, challenge.slug) if row.current else None,
                "earlier": _rate_row(row.earlier, earlier_challenge.slug) if row.earlier else None,
                "ratio": row.ratio,
                "basis": row.basis,
                "ratio_css": "" if row.ratio is None else ("r-met" if row.ratio >= 1 else "r-low"),
            }
            for row in rows
        ],
        "choices": selectors.rate_filter_choices(challenge=challenge, user=request.user),
        "filters": filters,
        "query": _query(filters),
        "matched": sum(1 for row in rows if row.matched),
    }
    return render(request, "results/rates_compare.html", context)
