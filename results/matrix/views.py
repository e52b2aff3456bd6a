"""Results pages: the FROM x TO matrix, the records behind it, the failure causes and the coordinators' failure
rules. Every table exports as ?format=csv or ?format=json (&table=NAME where a page has several); the records
stream, bounded by their filters. Readers who are DDM services see their own experiment's records only, as in the
rates table and the API."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.db.models import QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
)
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from challenges.models import Challenge
from challenges.selectors import challenge_for
from challenges.views import PLOTLY_VERSION, read_access
from common.exports import export_requested, table_response, table_stream_response
from common.times import iso_utc
from common.units import is_whole_number
from reports.selectors import report_markers
from sites.models import Experiment
from sites.roles import experiment_ids_read, experiments_visible
from sites.views import action_required

from ..failures import causes as failures
from ..filters import RecordFilter
from ..forms import FailureRuleForm
from ..models import FailureRule, TransferRecord
from ..selectors import records_visible_to
from ..store.retention import retired_notice
from ..tasks import failures_recategorize_on_commit
from . import challenge as matrix
from .measured import runs_agent_sites, runs_measured_label

RECORDS_PAGE = 100


# --- exports --------------------------------------------------------------------------------------------------


def _experiment(request: HttpRequest) -> Experiment | None:
    name = request.GET.get("experiment", "").strip()
    return Experiment.objects.filter(name__iexact=name).first() if name else None


def _experiment_ids(request: HttpRequest, experiment: Experiment | None) -> set[int] | None:
    """The experiments whose records a page shows: those the reader may see (None: all; a DDM service: its own, as
    in the rates table), narrowed to the selected one. Selecting an experiment one may not see selects nothing."""
    return experiment_ids_read(user=request.user, chosen=experiment)


def _experiment_choices(request: HttpRequest) -> QuerySet[Experiment]:
    """The experiments the selector offers: those the reader may see."""
    return experiments_visible(user=request.user).order_by("name")


# --- the matrix -----------------------------------------------------------------------------------------------

MATRIX_COLUMNS = [
    "source",
    "destination",
    "mode",
    "concurrency",
    "average_rate",
    "active_seconds",
    "volume",
    "sum_of_file_rates",
    "files_ok",
    "files_failed",
    "failure_ratio",
    "runs",
    "top_error",
    "measured_by",
]


def _matrix_row(cell: matrix.MatrixCell, agent_sites: dict[int, str]) -> dict[str, Any]:
    """A cell as the exports give it: SI base units; `runs` the number of portal runs behind it, `measured_by` where
    they were measured (results.matrix.measured; None for DDM systems' records only)."""
    measured_by = runs_measured_label(cell.runs, agent_sites)
    return cell.as_row() | {"average_rate": cell.rate, "runs": len(cell.runs), "measured_by": measured_by}


def _records_link(slug: str, cell: matrix.MatrixCell, experiment: Experiment | None) -> str:
    query: dict[str, Any] = {"source": cell.source, "destination": cell.destination}
    if experiment is not None:
        query["experiment"] = experiment.name
    if cell.mode is not None:
        query["mode"] = cell.mode
    if cell.concurrency is not None:
        query["concurrency"] = cell.concurrency
    return f"{reverse('results-matrix:records', args=[slug])}?{urlencode(query)}"


@read_access
def challenge_matrix(request: HttpRequest, slug: str) -> HttpResponse:
    """FROM x TO: rows source sites, columns destination sites; ?mode=, ?concurrency=, ?experiment= select;
    exports take ?split=mode,concurrency to break the cells down; ?resolution=unions|records|minute asks for one
    way of computing it (results.matrix), which the page, the JSON and the X-Matrix-Resolution header name."""
    challenge = challenge_for(slug=slug, user=request.user)
    experiment = _experiment(request)
    mode = request.GET.get("mode") or None
    concurrency_text = request.GET.get("concurrency", "")
    concurrency = int(concurrency_text) if is_whole_number(concurrency_text) else None
    split = [part for part in matrix.SPLITS if part in request.GET.get("split", "").split(",")]
    resolution = request.GET.get("resolution") if request.GET.get("resolution") in matrix.RESOLUTIONS else None
    result = matrix.matrix_for_challenge(
        challenge=challenge,
        experiment_ids=_experiment_ids(request, experiment),
        mode=mode,
        concurrency=concurrency,
        split=split,
        resolution=resolution,
    )
    agent_sites = runs_agent_sites({run for cell in result.cells for run in cell.runs})
    if export_requested(request):
        rows = [_matrix_row(cell, agent_sites) for cell in result.cells]
        about = {"resolution": result.resolution}
        response = table_response(request, name=f"{slug}-matrix", columns=MATRIX_COLUMNS, rows=rows, about=about)
        response["X-Matrix-Resolution"] = result.resolution
        return response
    markers = report_markers(challenge=challenge, user=request.user)
    tables = [
        {
            "mode": group_mode,
            "concurrency": group_concurrency,
            # {site name: marker}; the template shows them beside the row and column headers.
            "rows": [
                (source, markers.get(source), _grid_row(slug, experiment, result.sites, row, agent_sites))
                for source, row in result.grid(cells)
            ],
        }
        for group_mode, group_concurrency, cells in result.groups()
    ]
    context = {
        "challenge": challenge,
        "matrix": result,
        "tables": tables,
        "split": ",".join(split),
        "columns": [(site, markers.get(site)) for site in result.sites],
        "reports_url": reverse("reports:list", args=[slug]),
        "experiments": _experiment_choices(request),
        "experiment": experiment,
        "heatmap": matrix.matrix_heatmap_figure(matrix=result),
        "plotly_version": PLOTLY_VERSION,
        "query": urlencode(
            {k: v for k, v in request.GET.items() if k in ("experiment", "mode", "concurrency", "split")}
        ),
    }
    return render(request, "results/matrix.html", context)


def _grid_row(
    slug: str,
    experiment: Experiment | None,
    sites: list[str],
    row: list[matrix.MatrixCell | None],
    agent_sites: dict[int, str],
) -> list[dict[str, Any]]:
    return [
        {
            "destination": destination,
            "cell": cell,
            "link": _records_link(slug, cell, experiment) if cell else None,
            "failed": None if cell is None or cell.failure_ratio is None else f"{cell.failure_ratio:.1%}",
            "measured_by": runs_measured_label(cell.runs, agent_sites) if cell else None,
        }
        for destination, cell in zip(sites, row, strict=True)
    ]


# --- the records ----------------------------------------------------------------------------------------------

RECORD_COLUMNS = [
    "id",
    "experiment",
    "source",
    "destination",
    "bytes",
    "start",
    "end",
    "state",
    "mode",
    "concurrency",
    "category",
    "error_message",
    "origin",
    "origin_id",
    "source_url",
    "destination_url",
]


def _record_row(record: TransferRecord) -> dict[str, Any]:
    return {
        "id": record.pk,
        "experiment": record.experiment.name if record.experiment else None,
        "source": record.source_site.name if record.source_site else None,
        "destination": record.destination_site.name if record.destination_site else None,
        "bytes": record.bytes,
        "start": iso_utc(record.start),
        "end": iso_utc(record.end),
        "state": record.state,
        "mode": record.mode,
        "concurrency": record.concurrency,
        "category": record.error_category,
        "error_message": record.error_message,
        "origin": record.origin,
        "origin_id": record.origin_id,
        "source_url": record.source_url,
        "destination_url": record.destination_url,
    }


@read_access
def challenge_records(request: HttpRequest, slug: str) -> HttpResponseBase:
    """The records of a challenge with the API's filters, 100 a page (start, id order); the exports stream every
    record that the filters select."""
    challenge = challenge_for(slug=slug, user=request.user)
    data = request.GET.copy()
    data["challenge"] = slug
    filterset = RecordFilter(data, queryset=records_visible_to(user=request.user))
    records = filterset.qs if filterset.is_valid() else TransferRecord.objects.none()
    if export_requested(request):
        rows = (_record_row(record) for record in records.iterator(chunk_size=2000))
        return table_stream_response(request, name=f"{slug}-records", columns=RECORD_COLUMNS, rows=rows)
    page_text = request.GET.get("page", "1")
    page = max(int(page_text), 1) if is_whole_number(page_text) else 1
    offset = (page - 1) * RECORDS_PAGE
    rows = list(records[offset : offset + RECORDS_PAGE + 1])  # one more tells whether a next page exists
    filters = {k: v for k, v in request.GET.items() if k not in ("page", "format", "challenge") and v}
    context = {
        "challenge": challenge,
        "filterset": filterset,
        "records": rows[:RECORDS_PAGE],
        "page": page,
        "previous_query": urlencode(filters | {"page": page - 1}) if page > 1 else None,
        "next_query": urlencode(filters | {"page": page + 1}) if len(rows) > RECORDS_PAGE else None,
        "query": urlencode(filters),
        "filters": filters,
        "retired": retired_notice(start=challenge.start, end=challenge.end),
    }
    return render(request, "results/records.html", context)


# --- failure causes -------------------------------------------------------------------------------------------


@read_access
def challenge_failures(request: HttpRequest, slug: str) -> HttpResponse:
    """Per link and mode: failures per category and the most common messages; failures per hour and category.
    FTS's category, scope and phase beside them. Exports: ?table=causes (default), messages, fts or hourly."""
    challenge = challenge_for(slug=slug, user=request.user)
    experiment = _experiment(request)
    result = failures.failures_for_challenge(challenge=challenge, experiment_ids=_experiment_ids(request, experiment))
    if export_requested(request):
        table = request.GET.get("table", "causes")
        if table == "messages":
            columns = ["source", "destination", "mode", "message", "count"]
            return table_response(request, name=f"{slug}-failure-messages", columns=columns, rows=result.message_rows())
        if table == "fts":
            columns = ["source", "destination", "mode", "category", "scope", "phase", "failures"]
            return table_response(request, name=f"{slug}-failures-fts", columns=columns, rows=result.fts_rows())
        if table == "hourly":
            columns = ["hour", "category", "failures"]
            return table_response(request, name=f"{slug}-failures-hourly", columns=columns, rows=result.hourly_rows())
        columns = ["source", "destination", "mode", "failures", *(value for value, _ in result.categories)]
        return table_response(request, name=f"{slug}-failure-causes", columns=columns, rows=result.as_rows())
    records_url = reverse("results-matrix:records", args=[slug])
    links = [
        (
            link,
            [
                (
                    link.counts.get(value, 0),
                    f"{records_url}?"
                    + urlencode(
                        {"source": link.source, "destination": link.destination, "mode": link.mode, "state": "failed"}
                        | ({"category": value} if value else {})
                        | ({"experiment": experiment.name} if experiment else {})
                    ),
                )
                for value, _ in result.categories
            ],
        )
        for link in result.links
    ]
    context = {
        "challenge": challenge,
        "failures": result,
        "links": links,
        "experiments": _experiment_choices(request),
        "experiment": experiment,
        "hourly": failures.failures_hourly_figure(failures=result, start=challenge.start, end=challenge.end),
        "plotly_version": PLOTLY_VERSION,
        "query": urlencode({"experiment": experiment.name} if experiment else {}),
        "retired": retired_notice(start=challenge.start, end=challenge.end),
    }
    return render(request, "results/failures.html", context)


# --- the coordinators' failure rules --------------------------------------------------------------------------

RECATEGORIZING = (
    "The stored failed records are being re-categorised in the background (minutes for millions of records); "
    "the failure causes show the new categories when it is done."
)


def _rules_page(request: HttpRequest, form: FailureRuleForm) -> HttpResponse:
    message = request.GET.get("message", "")
    tried = failures.failure_categorize(message) if message else None
    context = {
        "rules": FailureRule.objects.order_by("position", "id"),
        "form": form,
        "challenges": Challenge.objects.order_by("-start"),
        "message": message,
        "tried": tried,
    }
    return render(request, "results/failures_rules.html", context)


@action_required("edit")
def failure_rules(request: HttpRequest) -> HttpResponse:
    """The ordered rules, a form to add one (errors in place), ?message= to try a message against them."""
    form = FailureRuleForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        rule = form.save()
        failures_recategorize_on_commit()
        messages.success(request, f"Rule {rule.pattern!r} added. {RECATEGORIZING}")
        return redirect("results-matrix:failure_rules")
    return _rules_page(request, form)


@action_required("edit")
def failure_rule_edit(request: HttpRequest, pk: int) -> HttpResponse:
    rule = get_object_or_404(FailureRule, pk=pk)
    form = FailureRuleForm(request.POST or None, instance=rule)
    if request.method == "POST" and form.is_valid():
        form.save()
        failures_recategorize_on_commit()
        messages.success(request, f"Rule {rule.pattern!r} saved. {RECATEGORIZING}")
        return redirect("results-matrix:failure_rules")
    return render(request, "results/failures_rule_form.html", {"form": form, "rule": rule})


@require_POST
@action_required("edit")
def failure_rule_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """up / down in the order, enable / disable, delete."""
    rule = get_object_or_404(FailureRule, pk=pk)
    if action in ("up", "down"):
        failures.failure_rule_move(rule=rule, offset=-1 if action == "up" else 1)
        messages.success(request, f"Rule {rule.pattern!r} moved {action}. {RECATEGORIZING}")
    elif action in ("enable", "disable"):
        rule.enabled = action == "enable"
        rule.save(update_fields=["enabled"])
        messages.success(request, f"Rule {rule.pattern!r} {action}d. {RECATEGORIZING}")
    elif action == "delete":
        rule.delete()
        messages.success(request, f"Rule {rule.pattern!r} deleted. {RECATEGORIZING}")
    else:
        raise Http404(action)
    failures_recategorize_on_commit()
    return redirect("results-matrix:failure_rules")


@require_POST
@action_required("edit")
def failure_rules_recategorize(request: HttpRequest) -> HttpResponse:
    """Re-categorise the stored failed records (one challenge's, or all) with the current rules, in the background."""
    slug = request.POST.get("challenge", "")
    challenge = challenge_for(slug=slug, user=request.user, action="edit") if slug else None
    failures_recategorize_on_commit(challenge=challenge)
    scope = challenge.name if challenge else "all challenges"
    messages.success(
        request,
        f"The failed records of {scope} are being re-categorised in the background (minutes for millions of "
        "records); the failure causes show the new categories when it is done.",
    )
    return redirect("results-matrix:failure_rules")
