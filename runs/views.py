"""Run pages: the live run page (progress polled with htmx until the run ends), a challenge's runs, the Run form
of an activity (coordinators, with ad hoc overrides) and Cancel. The work is done by runs.services and the engine."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib import messages as flash
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from challenges.models import Activity, Challenge
from challenges.selectors import challenge_for
from challenges.views import PLOTLY_VERSION, read_access
from common.exports import export_requested, table_response
from common.units import duration_text, is_whole_number
from results.active_rates import active_rates
from results.matrix.cells import link_matrix
from results.models import TransferRecord
from sites.roles import object_for, user_may
from sites.views import action_required

from . import selectors
from .choices import RUN_ENDED, CopiesState, FileState, RunState
from .copies import run_copies_delete as copies_delete_service
from .kinds.base import RunLink
from .kinds.registry import kind_for, per_file, run_parameters
from .kinds.transfer import TRANSFER_MODES
from .models import Run, RunFile
from .probes.results import probe_results
from .probes.tables import probe_figures
from .selectors import SiteNames, run_figures, runs_with_figures
from .services import run_cancel as run_cancel_service
from .services import run_start


class HtmxHttpRequest(HttpRequest):
    """A request as django_htmx's middleware leaves it (for the type checker)."""

    htmx: HtmxDetails


RUNS_PAGE = 50
# The latest failed files the run page shows with gfal2's message (all of them: the files API).
FAILURES = 5
# How often the run page asks for fresh figures while the run goes on.
POLL_SECONDS = 2
# After its end, the run page keeps asking until its copies are kept or deleted, for at most this long (a clean-up
# that no worker takes is re-sent by the reaper after 10 minutes; a page left open need not ask forever).
COPIES_POLL = timedelta(minutes=15)


def _run_or_404(request: HttpRequest, pk: int, action: str = "view") -> Run:
    """The run, if this user may read it (a DDM token reads its own experiment's runs only; 404), and take `action` on
    it (403)."""
    runs = Run.objects.select_related("activity__challenge", "activity__experiment", "created_by", "agent__site")
    return object_for(queryset=runs, user=request.user, action=action, pk=pk)  # type: ignore[no-any-return]


def copies_settling(run: Run, *, now: datetime) -> bool:
    """The run has ended but its copies are not kept or deleted yet (the last copies in flight are ending, or a
    worker is deleting them), and it ended recently enough for its page to keep asking."""
    if run.state not in RUN_ENDED or run.copies not in (CopiesState.PRESENT, CopiesState.DELETING):
        return False
    return run.finished_at is None or now - run.finished_at < COPIES_POLL


def _progress_context(run: Run) -> dict[str, Any]:
    progress = selectors.run_progress(run)
    finished = progress.files_done + progress.files_failed + progress.files_cancelled
    ended = progress.state in RUN_ENDED
    rates = active_rates(TransferRecord.objects.filter(run=run)) if ended else None
    probe = progress.probe
    return {
        "run": run,
        "progress": progress,
        "ended": ended,
        "polling": not ended or copies_settling(run, now=timezone.now()),
        "files_ended": finished,
        "poll_seconds": POLL_SECONDS,
        "eta": duration_text(progress.eta_seconds),
        "probe_elapsed": duration_text(probe.elapsed_seconds) if probe else None,
        "probe_expected": duration_text(probe.expected_seconds) if probe and probe.expected_seconds else None,
        "probe_heartbeat": duration_text(probe.heartbeat_seconds) if probe else None,
        "rates": rates,
        "average_rate": rates.average_rate if rates else None,
        "failures": list(RunFile.objects.filter(run=run, state=FileState.FAILED).order_by("-end", "-index")[:FAILURES]),
    }


def _results_context(run: Run) -> dict[str, Any]:
    """What the run measured, below its progress: its probe's results and figures, its FROM x TO table. The run
    page shows them, and its progress panel sends them again (htmx out-of-band) once the run has ended, so that
    they appear without a reload."""
    probe = probe_results(run)
    return {
        "probe": probe,
        "probe_figures": probe_figures(probe),
        "plotly_version": PLOTLY_VERSION,
        "matrix": link_matrix(TransferRecord.objects.filter(run=run)) if per_file(run.kind) else [],
    }


def parameter_text(value: Any) -> str:
    """A run parameter as people read it: lists joined, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return str(value)


def records_query(run: Run) -> dict[str, str] | None:
    """The filters of the results records page that come closest to this run's records: its experiment and
    source site, and `run` (which that page does not filter on yet: until it does, other runs' records of the
    same experiment and source show too). None for an ad hoc run: the records page lists a challenge's."""
    if run.activity is None:
        return None
    query = {"run": str(run.pk), "experiment": run.activity.experiment.name}
    site = run_parameters(run).site
    if site:
        query["source"] = str(site)
    return query


@require_GET
@read_access
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: what it was asked to do and its live progress."""
    run = _run_or_404(request, pk)
    records = records_query(run)
    context = (
        _progress_context(run)
        | _results_context(run)
        | {
            "can_run": user_may(user=request.user, action="start"),
            "records": records,
            "records_query": urlencode(records) if records else None,
            "recalls": run_parameters(run).recalled_runs(),
            "parameters": [(name, parameter_text(value)) for name, value in sorted(run.parameters.items())]
            if isinstance(run.parameters, dict)
            else [],
        }
    )
    return render(request, "runs/run_detail.html", context)


@require_GET
@read_access
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress panel alone: what htmx swaps in every few seconds. Once the run has ended it also carries what
    the run measured (out of band: the sections below it), and it stops asking when the run's copies are kept or
    deleted."""
    run = _run_or_404(request, pk)
    context = _progress_context(run) | {"can_run": user_may(user=request.user, action="start")}
    if context["ended"]:
        context |= _results_context(run) | {"results_out_of_band": True}
    return render(request, "runs/run_progress.html", context)


@require_POST
@action_required("cancel")
def run_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    """Cancel (coordinators): queued files are cancelled, copies in flight aborted."""
    run = _run_or_404(request, pk, "cancel")
    error = None
    try:
        run = run_cancel_service(run, user=request.user)
    except DjangoValidationError as exc:
        error = "; ".join(exc.messages)
    if request.htmx:
        context = _progress_context(run) | {"can_run": True, "error": error}
        if context["ended"]:
            context |= _results_context(run) | {"results_out_of_band": True}
        return render(request, "runs/run_progress.html", context)
    return redirect("runs:detail", pk=run.pk)


@require_POST
@action_required("cancel")
def run_copies_delete(request: HttpRequest, pk: int) -> HttpResponseBase:
    """Delete the copies an ended run kept (coordinators); a worker deletes them and the page then says so."""
    run = _run_or_404(request, pk, "cancel")
    try:
        copies_delete_service(run, user=request.user)
    except DjangoValidationError as exc:
        flash.error(request, "; ".join(exc.messages))
    return redirect("runs:detail", pk=run.pk)


RUN_COLUMNS = [
    "id",
    "activity",
    "kind",
    "state",
    "link",
    "link_urls",
    "mode",
    "concurrency",
    "file_count",
    "file_size",
    "volume",
    "average_rate",
    "active_seconds",
    "files_failed",
    "duration",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "parameters",
    "message",
]


def run_link(run: Run, *, sites: SiteNames) -> RunLink:
    """A run's link by site name: a transfer's source and destinations, a probe's worker site and what it measured
    (an iperf3 host, an io endpoint, a cache, a tape): its kind's (runs.kinds), with the URLs or host behind the
    names (the list shows them on hover, the exports in a column of their own)."""
    kind = kind_for(run.kind)
    if kind is None:
        return RunLink(run_parameters(run).site or "", "")
    return kind.link(kind.parameters(run), sites)


def parameters_text(parameters: Any) -> str:
    """A run's parameters as key=value pairs ("concurrency=10; file_size=1000000; ..."), never a Python repr."""
    if not isinstance(parameters, dict):
        return ""
    return "; ".join(f"{name}={parameter_text(value)}" for name, value in sorted(parameters.items()))


def run_row(run: Run, *, sites: SiteNames) -> dict[str, Any]:
    """One run as the list and its exports give it (figures from runs_with_figures: bytes, B/s, seconds)."""
    link = run_link(run, sites=sites)
    return {
        "id": run.pk,
        "activity": run.activity.name if run.activity else None,
        "kind": run.kind,
        "state": run.get_state_display(),
        "link": link.names,
        "link_urls": link.urls,
        **run_parameters(run).list_columns(),
        **run_figures(run),
        "created_by": run.created_by.get_username() if run.created_by else None,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "parameters": parameters_text(run.parameters),
        "message": run.message,
    }


def challenge_runs_queryset(*, request: HttpRequest, challenge: Challenge) -> QuerySet[Run]:
    runs_of = selectors.runs_visible_to(user=request.user).filter(activity__challenge=challenge)
    activity = request.GET.get("activity", "").strip()
    if is_whole_number(activity):
        runs_of = runs_of.filter(activity_id=int(activity))
    state = request.GET.get("state", "").strip()
    return runs_of.filter(state=state) if state else runs_of


@require_GET
@read_access
def challenge_runs(request: HttpRequest, slug: str) -> HttpResponse:
    """The runs of a challenge's activities, newest first, 50 a page; ?state= filters; CSV/JSON export."""
    challenge = challenge_for(slug=slug, user=request.user)
    queryset = challenge_runs_queryset(request=request, challenge=challenge)
    if export_requested(request):
        sites = SiteNames()
        rows = [run_row(run, sites=sites) for run in runs_with_figures(queryset)]
        return table_response(request, name=f"{slug}-runs", columns=RUN_COLUMNS, rows=rows)
    page = Paginator(runs_with_figures(queryset), RUNS_PAGE).get_page(request.GET.get("page"))
    sites = SiteNames()
    context = {
        "challenge": challenge,
        "page": page,
        "rows": [(run, run_row(run, sites=sites)) for run in page],
        "state": request.GET.get("state", ""),
        "states": RunState.choices,
        "can_run": user_may(user=request.user, action="start"),
    }
    return render(request, "runs/run_list.html", context)


class RunForm(forms.Form):
    """What a coordinator may change for one run; blank fields keep the activity's values."""

    file_count = forms.IntegerField(required=False, min_value=1, help_text="files to move")
    file_size = forms.IntegerField(required=False, min_value=1, help_text="bytes per file, e.g. 1000000 for 1 MB")
    concurrency = forms.IntegerField(required=False, min_value=1, help_text="files in flight at once")
    copy_mode = forms.ChoiceField(
        required=False,
        choices=[("", "the activity's"), *[(mode, mode) for mode in TRANSFER_MODES]],
        label="Copy mode",
    )

    def __init__(self, *args: Any, activity: Activity, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kind = kind_for(activity.kind)
        keep = kind.given if kind is not None else frozenset()  # a probe takes the rest from the plan
        for name in set(self.fields) - keep:
            del self.fields[name]
        for name in self.fields:
            value = getattr(activity, name)
            if value not in (None, ""):
                self.fields[name].widget.attrs["placeholder"] = str(value)

    def overrides(self) -> dict[str, Any]:
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "")}


@action_required("start")
def activity_run(request: HttpRequest, slug: str, pk: int) -> HttpResponseBase:
    """Run an activity now (coordinators), optionally with other file count, size, concurrency or copy mode."""
    activity = object_for(
        queryset=Activity.objects.select_related("challenge", "experiment", "source"), user=request.user,
        action="start", pk=pk, challenge__slug=slug,
    )  # fmt: skip
    form = RunForm(request.POST or None, activity=activity)
    if request.method == "POST" and form.is_valid():
        try:
            run = run_start(user=request.user, activity=activity, parameters=form.overrides())
        except DjangoValidationError as exc:
            _errors_onto_form(form, exc)
        else:
            return redirect("runs:detail", pk=run.pk)
    context = {
        "form": form,
        "activity": activity,
        "challenge": activity.challenge,
        "cancel": reverse("challenges:clock", args=[activity.challenge.slug]) + f"#activity-{activity.pk}",
        "recent": list(selectors.runs_visible_to(user=request.user).filter(activity=activity)[:5]),
        "window_warning": selectors.activity_window_warning(activity=activity, now=timezone.now()),
    }
    return render(request, "runs/run_form.html", context)


def _errors_onto_form(form: RunForm, exc: DjangoValidationError) -> None:
    """run_start's messages next to the fields they are about; the rest above the form."""
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc)
        return
    for field, messages in exc.message_dict.items():
        name = field.removeprefix("parameters.")
        for message in messages:
            if name in form.fields:
                form.add_error(name, message)
            else:
                form.add_error(None, f"{field}: {message}" if field not in ("__all__", "parameters") else message)
