"""Run pages: the live run page (progress polled with htmx until the run ends), a challenge's runs, the Run form
of an activity (coordinators, with ad hoc overrides) and Cancel. The work is done by challenges.runs."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.middleware import HtmxDetails

from sites.roles import user_is_coordinator

from . import runs
from .api.runs import runs_visible_to
from .choices import RUN_ENDED, ActivityKind, RunState
from .models import Activity, Challenge, FileState, Run, RunFile
from .views import _export, _wants_export, read_access


class HtmxHttpRequest(HttpRequest):
    """A request as django_htmx's middleware leaves it (for the type checker)."""

    htmx: HtmxDetails


RUNS_PAGE = 50
# The latest failed files the run page shows with gfal2's message (all of them: the files API).
FAILURES = 5
# How often the run page asks for fresh figures while the run goes on.
POLL_SECONDS = 2


def _run_or_404(request: HttpRequest, pk: int) -> Run:
    """The run, if this user may read it (a DDM token reads its own experiment's runs only)."""
    return get_object_or_404(runs_visible_to(user=request.user), pk=pk)


def _coordinator_or_refuse(request: HttpRequest, what: str) -> HttpResponseBase | None:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not user_is_coordinator(user=request.user):
        raise PermissionDenied(f"only coordinators {what}")
    return None


def _progress_context(run: Run) -> dict[str, Any]:
    progress = runs.run_progress(run)
    finished = progress.files_done + progress.files_failed + progress.files_cancelled
    return {
        "run": run,
        "progress": progress,
        "ended": progress.state in RUN_ENDED,
        "files_ended": finished,
        "poll_seconds": POLL_SECONDS,
        "eta": duration_text(progress.eta_seconds),
        "average_rate": average_rate(progress),
        "failures": list(RunFile.objects.filter(run=run, state=FileState.FAILED).order_by("-end", "-index")[:FAILURES]),
    }


def average_rate(progress: runs.RunProgress) -> float | None:
    """Bytes done over the run's whole duration, once it has ended (the 60 s rate fades after the end)."""
    if progress.started_at is None or progress.finished_at is None:
        return None
    seconds = (progress.finished_at - progress.started_at).total_seconds()
    return progress.bytes_done / seconds if seconds > 0 else None


def parameter_text(value: Any) -> str:
    """A run parameter as people read it: lists joined, None as a dash."""
    if value is None:
        return "—"
    if isinstance(value, list | tuple):
        return ", ".join(str(item) for item in value)
    return str(value)


def duration_text(seconds: float | None) -> str:
    """An ETA as people read it: "45 s", "3 min 20 s", "2 h 05 min"; an em dash when unknown."""
    if seconds is None:
        return "—"
    total = max(round(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def records_query(run: Run) -> dict[str, str] | None:
    """The filters of the results records page that come closest to this run's records: its experiment and
    source site, and `run` (which that page does not filter on yet: until it does, other runs' records of the
    same experiment and source show too). None for an ad hoc run: the records page lists a challenge's."""
    if run.activity is None:
        return None
    query = {"run": str(run.pk), "experiment": run.activity.experiment.name}
    site = run.parameters.get("site") if isinstance(run.parameters, dict) else None
    if site:
        query["source"] = str(site)
    return query


@require_GET
@read_access
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One run: what it was asked to do and its live progress."""
    run = _run_or_404(request, pk)
    records = records_query(run)
    context = _progress_context(run) | {
        "can_run": user_is_coordinator(user=request.user),
        "records": records,
        "records_query": urlencode(records) if records else None,
        "parameters": [(name, parameter_text(value)) for name, value in sorted(run.parameters.items())]
        if isinstance(run.parameters, dict)
        else [],
    }
    return render(request, "challenges/run_detail.html", context)


@require_GET
@read_access
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    """The progress panel alone: what htmx swaps in every few seconds; it stops asking once the run ended."""
    run = _run_or_404(request, pk)
    context = _progress_context(run) | {"can_run": user_is_coordinator(user=request.user)}
    return render(request, "challenges/partials/run_progress.html", context)


@require_POST
def run_cancel(request: HtmxHttpRequest, pk: int) -> HttpResponseBase:
    """Cancel (coordinators): queued files are cancelled, copies in flight aborted."""
    refused = _coordinator_or_refuse(request, "cancel runs")
    if refused is not None:
        return refused
    run = _run_or_404(request, pk)
    error = None
    try:
        run = runs.run_cancel(run, user=request.user)
    except DjangoValidationError as exc:
        error = "; ".join(exc.messages)
    if request.htmx:
        context = _progress_context(run) | {"can_run": True, "error": error}
        return render(request, "challenges/partials/run_progress.html", context)
    return redirect("challenges:run_detail", pk=run.pk)


RUN_COLUMNS = [
    "id",
    "activity",
    "kind",
    "state",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "parameters",
    "message",
]


def _run_rows(run_list: list[Run]) -> list[dict[str, Any]]:
    return [
        {
            "id": run.pk,
            "activity": run.activity.name if run.activity else None,
            "kind": run.kind,
            "state": run.state,
            "created_by": run.created_by.get_username() if run.created_by else None,
            "created_at": run.created_at.isoformat(),
            "started_at": run.started_at.isoformat() if run.started_at else None,
            "finished_at": run.finished_at.isoformat() if run.finished_at else None,
            "parameters": run.parameters,
            "message": run.message,
        }
        for run in run_list
    ]


def challenge_runs_queryset(*, request: HttpRequest, challenge: Challenge) -> QuerySet[Run]:
    runs_of = runs_visible_to(user=request.user).filter(activity__challenge=challenge)
    state = request.GET.get("state", "").strip()
    return runs_of.filter(state=state) if state else runs_of


@require_GET
@read_access
def challenge_runs(request: HttpRequest, slug: str) -> HttpResponse:
    """The runs of a challenge's activities, newest first, 50 a page; ?state= filters; CSV/JSON export."""
    challenge = get_object_or_404(Challenge, slug=slug)
    queryset = challenge_runs_queryset(request=request, challenge=challenge)
    if _wants_export(request):
        return _export(request, name=f"{slug}-runs", columns=RUN_COLUMNS, rows=_run_rows(list(queryset)))
    page = Paginator(queryset, RUNS_PAGE).get_page(request.GET.get("page"))
    context = {
        "challenge": challenge,
        "page": page,
        "state": request.GET.get("state", ""),
        "states": RunState.choices,
        "can_run": user_is_coordinator(user=request.user),
    }
    return render(request, "challenges/run_list.html", context)


class RunForm(forms.Form):
    """What a coordinator may change for one run; blank fields keep the activity's values."""

    file_count = forms.IntegerField(required=False, min_value=1, help_text="files to move")
    file_size = forms.IntegerField(required=False, min_value=1, help_text="bytes per file, e.g. 1000000 for 1 MB")
    concurrency = forms.IntegerField(required=False, min_value=1, help_text="files in flight at once")
    copy_mode = forms.ChoiceField(
        required=False,
        choices=[("", "the activity's"), *[(mode, mode) for mode in runs.TRANSFER_MODES]],
        label="Copy mode",
    )

    def __init__(self, *args: Any, activity: Activity, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if activity.kind not in runs.TRANSFER_KINDS:  # a probe takes its own parameters from the plan
            keep = {"file_size"} if activity.kind == ActivityKind.IO else set()
            for name in set(self.fields) - keep:
                del self.fields[name]
        for name in self.fields:
            value = getattr(activity, name)
            if value not in (None, ""):
                self.fields[name].widget.attrs["placeholder"] = str(value)

    def overrides(self) -> dict[str, Any]:
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "")}


def activity_run(request: HttpRequest, slug: str, pk: int) -> HttpResponseBase:
    """Run an activity now (coordinators), optionally with other file count, size, concurrency or copy mode."""
    refused = _coordinator_or_refuse(request, "start runs")
    if refused is not None:
        return refused
    activity = get_object_or_404(
        Activity.objects.select_related("challenge", "experiment", "source"), pk=pk, challenge__slug=slug
    )
    form = RunForm(request.POST or None, activity=activity)
    if request.method == "POST" and form.is_valid():
        try:
            run = runs.run_start(user=request.user, activity=activity, parameters=form.overrides())
        except DjangoValidationError as exc:
            _errors_onto_form(form, exc)
        else:
            return redirect("challenges:run_detail", pk=run.pk)
    context = {
        "form": form,
        "activity": activity,
        "challenge": activity.challenge,
        "cancel": reverse("challenges:clock", args=[activity.challenge.slug]) + f"#activity-{activity.pk}",
        "recent": list(runs_visible_to(user=request.user).filter(activity=activity)[:5]),
    }
    return render(request, "challenges/run_form.html", context)


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
