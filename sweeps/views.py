"""Sweep pages: the list, the form (coordinators), one sweep's JUNO tables with their exports and progress, cancel,
and the comparison with an earlier sweep. Who may read a sweep is the access policy's (sweeps_visible_to)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages as flash
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from challenges.choices import ActivityKind
from challenges.models import Activity
from challenges.views import read_access
from common.exports import export_requested, table_response
from common.units import is_whole_number
from results.matrix.measured import PORTAL_WORKERS
from runs.parameters import CHECKSUMS
from sites.models import Site
from sites.roles import object_for, user_may
from sites.views import action_required

from . import plan
from .choices import MODES, PROTOCOLS, SweepState
from .grids import (
    COMPARE_COLUMNS,
    FUNCTIONAL_COLUMNS,
    compare_network_rows,
    compare_rows,
    functional_grids,
    functional_rows,
    network_grid,
    throughput_grids,
)
from .models import Sweep
from .selectors import sweeps_visible_to
from .services import sweep_cancel, sweep_start
from .tables import (
    MATRIX_COLUMNS,
    NETWORK_COLUMNS,
    matrix_rows,
    network_rows,
    step_measured_by,
    steps_of,
    sweep_progress,
)

SWEEPS_PAGE = 50
REFRESH_SECONDS = 5
TABLES = ("functional", "throughput", "network", "steps")


def _sweep_or_404(request: HttpRequest, pk: int, action: str = "view") -> Sweep:
    """The sweep, if the user reads it (404), and may take `action` on it (403)."""
    sweep: Sweep = object_for(queryset=sweeps_visible_to(user=None), user=request.user, action=action, pk=pk)
    return sweep


@read_access
def sweep_list(request: HttpRequest) -> HttpResponse:
    sweeps = sweeps_visible_to(user=request.user).order_by("-created_at", "-id")
    page = Paginator(sweeps, SWEEPS_PAGE).get_page(request.GET.get("page"))
    rows = [(sweep, sweep_progress(sweep, steps_of(sweep))) for sweep in page]
    context = {"page": page, "rows": rows, "can_start": user_may(user=request.user, action="start")}
    return render(request, "sweeps/sweep_list.html", context)


class SweepForm(forms.Form):
    name = forms.CharField(max_length=200)
    sites = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, help_text="every ordered pair is a link")
    modes = forms.MultipleChoiceField(
        choices=[(mode, mode) for mode in MODES], widget=forms.CheckboxSelectMultiple, initial=["pull", "push"]
    )
    concurrency = forms.CharField(initial="10, 40, 100", help_text="files in flight, one step each: 10, 40, 100")
    file_size_mb = forms.IntegerField(
        label="File size (MB)", min_value=1, max_value=plan.MAX_FILE_SIZE // 10**6, initial=1000
    )
    file_count = forms.IntegerField(
        min_value=1, max_value=plan.MAX_FILE_COUNT, required=False, help_text="files per step; blank: its concurrency"
    )
    protocol = forms.ChoiceField(choices=[(p, p) for p in PROTOCOLS], initial="davs")
    checksum = forms.ChoiceField(
        choices=[(c, c) for c in CHECKSUMS], initial="ADLER32", help_text="none for storage that computes none"
    )
    network = forms.BooleanField(required=False, initial=True, label="iperf3 and path MTU per link")
    network_duration = forms.IntegerField(
        min_value=1, max_value=plan.MAX_NETWORK_DURATION, initial=plan.DEFAULT_NETWORK_DURATION, label="iperf3 (s)"
    )
    activity = forms.ModelChoiceField(
        queryset=Activity.objects.filter(kind=ActivityKind.TRANSFER).select_related("challenge"),
        required=False,
        help_text="the transfer activity its runs count for; blank: ad hoc",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Site.objects.filter(endpoints__kind="disk").distinct().order_by("name").values_list("name", flat=True)
        sites_field = self.fields["sites"]
        assert isinstance(sites_field, forms.MultipleChoiceField)
        sites_field.choices = [(name, name) for name in names]

    def clean_concurrency(self) -> list[int]:
        words = [word.strip() for word in self.cleaned_data["concurrency"].replace(";", ",").split(",")]
        if not words or not all(is_whole_number(word) and len(word) < 7 for word in words if word):
            raise forms.ValidationError("whole numbers separated by commas, e.g. 10, 40, 100")
        return [int(word) for word in words if word]

    def data_for_service(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "sites": data["sites"],
            "modes": data["modes"],
            "concurrency": data["concurrency"],
            "file_size": data["file_size_mb"] * 10**6,
            "file_count": data["file_count"],
            "protocol": data["protocol"],
            "checksum": data["checksum"],
            "network": data["network"],
            "network_duration": data["network_duration"],
        }


@action_required("start")
def sweep_new(request: HttpRequest) -> HttpResponseBase:
    form = SweepForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            sweep = sweep_start(user=request.user, data=form.data_for_service(), activity=form.cleaned_data["activity"])
        except DjangoValidationError as exc:
            for field, messages in exc.message_dict.items():
                for message in messages:
                    form.add_error(None, f"{field}: {message}" if field != "non_field_errors" else message)
        else:
            flash.success(request, f"Sweep {sweep.pk} started: {sweep.steps.count()} steps, one at a time.")
            return redirect("sweeps:detail", sweep.pk)
    return render(request, "sweeps/sweep_form.html", {"form": form})


def _export(request: HttpRequest, sweep: Sweep, rows: list[dict[str, Any]], net: list[dict[str, Any]]) -> HttpResponse:
    table = request.GET.get("table", "throughput")
    if table not in TABLES:
        raise Http404(f"no table {table[:40]!r}: one of {', '.join(TABLES)}")
    name = f"sweep-{sweep.pk}-{table}"
    if table == "functional":
        return table_response(request, name=name, columns=FUNCTIONAL_COLUMNS, rows=functional_rows(rows))
    if table == "network":
        return table_response(request, name=name, columns=NETWORK_COLUMNS, rows=net)
    if table == "steps":
        steps = [
            {
                "step": s.index,
                "kind": s.kind,
                "source": s.source.name,
                "destination": s.destination.name,
                "mode": s.mode,
                "concurrency": s.concurrency,
                "state": s.state,
                "run": s.run_id,
                "queue": s.queue,
                "measured_by": step_measured_by(s),
                "message": s.message,
                "started_at": s.started_at,
                "finished_at": s.finished_at,
            }
            for s in steps_of(sweep)
        ]
        columns = [
            "step",
            "kind",
            "source",
            "destination",
            "mode",
            "concurrency",
            "state",
            "run",
            "queue",
            "measured_by",
        ]
        return table_response(
            request, name=name, columns=[*columns, "message", "started_at", "finished_at"], rows=steps
        )
    return table_response(request, name=name, columns=MATRIX_COLUMNS, rows=rows)


@read_access
def sweep_detail(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = _sweep_or_404(request, pk)
    steps = steps_of(sweep)
    rows, net = matrix_rows(sweep, steps), network_rows(sweep, steps)
    if export_requested(request):
        return _export(request, sweep, rows, net)
    progress = sweep_progress(sweep, steps)
    measured_by = sorted({row["measured_by"] for row in [*rows, *net] if row["measured_by"]})
    earlier = sweeps_visible_to(user=request.user).filter(created_at__lt=sweep.created_at).exclude(pk=sweep.pk).first()
    context = {
        "sweep": sweep,
        "progress": progress,
        "under_way": sweep.state in (SweepState.QUEUED, SweepState.RUNNING),
        "refresh_seconds": REFRESH_SECONDS,
        "functional": functional_grids(rows),
        "throughput": throughput_grids(rows),
        "network": network_grid(net),
        "steps": [(step, step_measured_by(step)) for step in steps],
        "measured_by": measured_by,
        "portal_only": measured_by == [PORTAL_WORKERS],
        "can_cancel": user_may(user=request.user, action="cancel"),
        "earlier": earlier,
    }
    return render(request, "sweeps/sweep_detail.html", context)


@require_POST
@action_required("cancel")
def sweep_cancel_view(request: HttpRequest, pk: int) -> HttpResponseBase:
    sweep = _sweep_or_404(request, pk, "cancel")
    try:
        sweep_cancel(sweep, user=request.user)
    except DjangoValidationError as exc:
        flash.error(request, "; ".join(exc.messages))
    else:
        flash.success(request, f"Sweep {sweep.pk} cancelled.")
    return redirect("sweeps:detail", sweep.pk)


@read_access
def sweep_compare(request: HttpRequest, pk: int) -> HttpResponse:
    sweep = _sweep_or_404(request, pk)
    other_id = request.GET.get("with", "")
    if not is_whole_number(other_id) or len(other_id) > 18:
        candidates = sweeps_visible_to(user=request.user).exclude(pk=sweep.pk).order_by("-created_at")[:50]
        return render(request, "sweeps/sweep_compare.html", {"sweep": sweep, "candidates": candidates})
    other = _sweep_or_404(request, int(other_id))
    rows = compare_rows(matrix_rows(sweep, steps_of(sweep)), matrix_rows(other, steps_of(other)))
    rows += compare_network_rows(
        network_rows(sweep, steps_of(sweep)),
        network_rows(other, steps_of(other)),
    )
    if export_requested(request):
        return table_response(request, name=f"sweep-{sweep.pk}-vs-{other.pk}", columns=COMPARE_COLUMNS, rows=rows)
    return render(request, "sweeps/sweep_compare.html", {"sweep": sweep, "other": other, "rows": rows})
