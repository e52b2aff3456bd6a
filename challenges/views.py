"""Challenge pages: the list, the clock (grid + Gantt), the site load planner, the coordinators' forms, the
iCalendar feeds and the Plotly library itself (served from the installed package: the machines have no outside
network). Every table exports as ?format=csv or ?format=json (&table=NAME on pages with several)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import plotly
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_GET, require_POST
from plotly.offline import get_plotlyjs

from common.exports import export_requested, table_response
from common.times import iso_utc
from sites.models import Site
from sites.roles import object_for, user_may
from sites.tokens import token_authenticate
from sites.views import action_required

from . import charts, injection, selectors
from .calendar import activities_calendar
from .conflicts import challenge_conflicts
from .forms import ActivityForm, ChallengeForm, TargetForm
from .models import Activity, Target

View = Callable[..., HttpResponseBase]
PLOTLY_VERSION = plotly.__version__


# --- access ---------------------------------------------------------------------------------------------------


def read_access(view: View) -> View:
    """Logged-in users read; anyone does when settings.ANONYMOUS_READ is true."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated and not settings.ANONYMOUS_READ:
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return wrapper


def feed_access(view: View) -> View:
    """Like read_access, but calendar clients cannot log in: they may send `Authorization: Token KEY` instead,
    and are answered 401 rather than sent to the login page."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not request.user.is_authenticated and not settings.ANONYMOUS_READ:
            words = request.headers.get("Authorization", "").split()
            token = token_authenticate(key=words[1]) if len(words) == 2 and words[0].lower() == "token" else None
            if token is None or not token.user.is_active:
                response = HttpResponse("log in or send Authorization: Token KEY\n", status=401)
                response["WWW-Authenticate"] = "Token"
                return response
        return view(request, *args, **kwargs)

    return wrapper


# --- exports --------------------------------------------------------------------------------------------------


# --- reading pages --------------------------------------------------------------------------------------------


@read_access
def challenge_list(request: HttpRequest) -> HttpResponse:
    """Every challenge, newest first, with how many activities and experiments it plans."""
    challenges = selectors.challenges_visible(user=request.user).annotate(
        activity_count=Count("activities", distinct=True),
        experiment_count=Count("activities__experiment", distinct=True),
    )
    if export_requested(request):
        columns = ["slug", "name", "start", "end", "activities", "experiments"]
        rows = [
            {
                "slug": c.slug,
                "name": c.name,
                "start": iso_utc(c.start),
                "end": iso_utc(c.end),
                "activities": c.activity_count,
                "experiments": c.experiment_count,
            }
            for c in challenges
        ]
        return table_response(request, name="challenges", columns=columns, rows=rows)
    return render(request, "challenges/challenge_list.html", {"challenges": challenges})


@read_access
def challenge_clock(request: HttpRequest, slug: str) -> HttpResponse:
    """The shared clock: the experiments x weeks grid, the Gantt timeline and the activities with targets."""
    challenge = selectors.challenge_for(slug=slug, user=request.user)
    if export_requested(request) and request.GET.get("table") == "activities":
        activities = list(selectors.challenge_activities(challenge=challenge, user=request.user))
        return table_response(
            request, name=f"{slug}-activities", columns=ACTIVITY_COLUMNS, rows=_activity_rows(activities)
        )
    grid = selectors.clock_grid(challenge=challenge, user=request.user)
    if export_requested(request):
        rows = [
            {
                "experiment": row.experiment,
                "week": cell.week.date().isoformat(),
                "modes": list(cell.modes),
                "kinds": list(cell.kinds),
                "activities": [entry.name for entry in cell.entries],
            }
            for row in grid.rows
            for cell in row.cells
        ]
        columns = ["experiment", "week", "modes", "kinds", "activities"]
        return table_response(request, name=f"{slug}-clock", columns=columns, rows=rows)
    activities = list(selectors.challenge_activities(challenge=challenge, user=request.user))
    gantt = charts.clock_gantt(activities=activities, now=timezone.now(), start=challenge.start, end=challenge.end)
    context = {
        "challenge": challenge,
        "grid": grid,
        "activities": [(activity, _targets_with_derivation(activity)) for activity in activities],
        "gantt": gantt,
        "plotly_version": PLOTLY_VERSION,
        "can_edit": user_may(user=request.user, action="edit"),
        "conflicts": challenge_conflicts(challenge=challenge, user=request.user),
    }
    return render(request, "challenges/challenge_clock.html", context)


ACTIVITY_COLUMNS = ["name", "experiment", "mode", "kind", "start", "end", "source", "targets"]


@read_access
def challenge_injection_plans(request: HttpRequest, slug: str) -> HttpResponse:
    """Rucio load injection plans from the clock, the unit they use and the links that give none; ?format=csv is
    the file Rucio's CLI imports."""
    challenge = selectors.challenge_for(slug=slug, user=request.user)
    plans, problems = injection.injection_plans(challenge=challenge, user=request.user)
    if export_requested(request):
        return table_response(
            request,
            name=f"{slug}-injection-plans",
            columns=injection.RUCIO_CSV_COLUMNS,
            rows=injection.injection_csv_rows(plans=plans),
            json_rows=[injection.injection_plan_dict(plan) for plan in plans],
        )
    context = {"challenge": challenge, "plans": plans, "problems": problems, "unit_note": injection.UNIT_NOTE}
    return render(request, "challenges/injection_plans.html", context)


def _activity_rows(activities: list[Activity]) -> list[dict[str, Any]]:
    return [
        {
            "name": activity.name,
            "experiment": activity.experiment.name,
            "mode": activity.mode,
            "kind": activity.kind,
            "start": iso_utc(activity.start),
            "end": iso_utc(activity.end),
            "source": activity.source.name if activity.source else None,
            "targets": [f"{target.place} {target.rate:.6g} B/s" for target in activity.targets.all()],
        }
        for activity in activities
    ]


def _targets_with_derivation(activity: Activity) -> list[tuple[Target, str | None]]:
    return [(target, selectors.target_derivation(target=target)) for target in activity.targets.all()]


LOAD_COLUMNS = [
    "start",
    "end",
    "hours",
    "site",
    "network_in_Bps",
    "network_out_Bps",
    "network_Bps",
    "network_capacity_Bps",
    "tape_in_Bps",
    "tape_out_Bps",
    "tape_Bps",
    "tape_capacity_Bps",
    "oversubscribed",
    "experiments",
]


@read_access
def challenge_load(request: HttpRequest, slug: str) -> HttpResponse:
    """The site load planner: every site's summed targets per hour against its capacity, and how many experiments
    run at once. ?per=hour on an export lists every hour instead of spans of identical hours."""
    challenge = selectors.challenge_for(slug=slug, user=request.user)
    table = request.GET.get("table", "load")
    hourly = request.GET.get("per") == "hour"
    if export_requested(request) and table == "concurrency":
        concurrency = selectors.experiments_concurrency(challenge=challenge, user=request.user)
        spans = (
            [(moment, moment + timedelta(seconds=concurrency.step), 1.0, span) for moment, span in concurrency.hourly()]
            if hourly
            else [(span.start, span.end, span.hours, span) for span in concurrency.spans]
        )
        rows = [
            {"start": iso_utc(a), "end": iso_utc(b), "hours": h, "count": s.count, "experiments": list(s.experiments)}
            for a, b, h, s in spans
        ]
        columns = ["start", "end", "hours", "count", "experiments"]
        return table_response(request, name=f"{slug}-experiments-at-once", columns=columns, rows=rows)
    load = selectors.site_load(challenge=challenge, user=request.user)
    if export_requested(request):
        step = timedelta(seconds=load.step)
        periods = (
            [(moment, moment + step, load.step / 3600, loads) for moment, loads in load.hourly()]
            if hourly
            else [(span.start, span.end, span.hours, span.loads) for span in load.spans]
        )
        rows = [
            {
                "start": iso_utc(start),
                "end": iso_utc(end),
                "hours": hours,
                "site": column.name,
                "network_in_Bps": cell.network_in,
                "network_out_Bps": cell.network_out,
                "network_Bps": cell.network,
                "network_capacity_Bps": cell.network_capacity,
                "tape_in_Bps": cell.tape_in,
                "tape_out_Bps": cell.tape_out,
                "tape_Bps": cell.tape,
                "tape_capacity_Bps": cell.tape_capacity,
                "oversubscribed": cell.oversubscribed,
                "experiments": list(cell.oversubscribed_experiments),
            }
            for start, end, hours, loads in periods
            for column, cell in zip(load.sites, loads, strict=True)
        ]
        return table_response(request, name=f"{slug}-site-load", columns=LOAD_COLUMNS, rows=rows)
    concurrency = selectors.experiments_concurrency(challenge=challenge, user=request.user)
    context = {
        "challenge": challenge,
        "load": load,
        "concurrency": concurrency,
        "oversubscribed_spans": sum(1 for span in load.spans if any(cell.oversubscribed for cell in span.loads)),
    }
    return render(request, "challenges/challenge_load.html", context)


# --- feeds and the Plotly library -----------------------------------------------------------------------------


def _calendar_response(body: bytes, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type="text/calendar; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="{filename}"'
    return response


@require_GET
@feed_access
def challenge_calendar(request: HttpRequest, slug: str) -> HttpResponse:
    """One VEVENT per activity of the challenge."""
    challenge = selectors.challenge_for(slug=slug, user=request.user)
    body = activities_calendar(
        activities=selectors.challenge_activities(challenge=challenge, user=request.user).order_by("start", "pk"),
        name=challenge.name,
        url_of=lambda c: request.build_absolute_uri(reverse("challenges:clock", args=[c.slug])),
    )
    return _calendar_response(body, f"{slug}.ics")


@require_GET
@feed_access
def site_calendar(request: HttpRequest, name: str) -> HttpResponse:
    """The activities of every challenge that target or source the site."""
    site = get_object_or_404(Site, name=name)
    body = activities_calendar(
        activities=selectors.site_activities(site=site, user=request.user),
        name=f"{site.name}: data challenges",
        url_of=lambda c: request.build_absolute_uri(reverse("challenges:clock", args=[c.slug])),
    )
    return _calendar_response(body, f"{site.name}.ics")


@functools.cache
def _plotly_js() -> bytes:
    return get_plotlyjs().encode()


@require_GET
@cache_control(public=True, max_age=31_536_000, immutable=True)
def plotly_js(request: HttpRequest) -> HttpResponse:
    """plotly.js from the installed Python package; pages add ?v=VERSION, so a year's caching is safe."""
    return HttpResponse(_plotly_js(), content_type="application/javascript; charset=utf-8")


# --- the coordinators' forms ----------------------------------------------------------------------------------


def _form_page(request: HttpRequest, *, form: Any, title: str, cancel: str, **extra: Any) -> HttpResponse:
    return render(request, "challenges/form.html", {"form": form, "title": title, "cancel": cancel, **extra})


@action_required("edit")
def challenge_create(request: HttpRequest) -> HttpResponse:
    form = ChallengeForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        challenge = form.save()
        messages.success(request, f"Challenge {challenge.name} created.")
        return redirect("challenges:clock", slug=challenge.slug)
    return _form_page(request, form=form, title="New challenge", cancel=reverse("challenges:list"))


@action_required("edit")
def challenge_edit(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = selectors.challenge_for(slug=slug, user=request.user, action="edit")
    form = ChallengeForm(request.POST or None, instance=challenge)
    if request.method == "POST" and form.is_valid():
        challenge = form.save()
        messages.success(request, f"Challenge {challenge.name} saved.")
        return redirect("challenges:clock", slug=challenge.slug)
    cancel = reverse("challenges:clock", args=[slug])
    return _form_page(request, form=form, title=f"Edit {challenge.name}", cancel=cancel, challenge=challenge)


@action_required("edit")
def activity_create(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = selectors.challenge_for(slug=slug, user=request.user, action="edit")
    form = ActivityForm(request.POST or None, challenge=challenge)
    if request.method == "POST" and form.is_valid():
        activity = form.save()
        messages.success(request, f"Activity {activity.name} created; add its targets.")
        return redirect("challenges:target_create", slug=slug, pk=activity.pk)
    cancel = reverse("challenges:clock", args=[slug])
    return _form_page(request, form=form, title=f"New activity in {challenge.name}", cancel=cancel, challenge=challenge)


@action_required("edit")
def activity_edit(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    activity = object_for(
        queryset=Activity.objects.select_related("challenge"), user=request.user, action="edit", pk=pk,
        challenge__slug=slug,
    )  # fmt: skip
    form = ActivityForm(request.POST or None, instance=activity, challenge=activity.challenge)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Activity {activity.name} saved.")
        return redirect("challenges:clock", slug=slug)
    targets = activity.targets.select_related("site", "link_from", "link_to")
    cancel = reverse("challenges:clock", args=[slug])
    return _form_page(
        request,
        form=form,
        title=f"Edit {activity.name}",
        cancel=cancel,
        challenge=activity.challenge,
        activity=activity,
        targets=[(target, selectors.target_derivation(target=target)) for target in targets],
        delete_url=reverse("challenges:activity_delete", args=[slug, pk]),
    )


@require_POST
@action_required("edit")
def activity_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    activity = object_for(
        queryset=Activity.objects.all(), user=request.user, action="edit", pk=pk, challenge__slug=slug
    )
    activity.delete()
    messages.success(request, f"Activity {activity.name} deleted.")
    return redirect("challenges:clock", slug=slug)


@action_required("edit")
def target_create(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    activity = object_for(
        queryset=Activity.objects.select_related("challenge", "experiment"), user=request.user, action="edit", pk=pk,
        challenge__slug=slug,
    )  # fmt: skip
    form = TargetForm(request.POST or None, activity=activity)
    if request.method == "POST" and form.is_valid():
        target = form.save()
        messages.success(request, f"Target {target.place} added to {activity.name}.")
        return redirect("challenges:clock", slug=slug)
    cancel = reverse("challenges:clock", args=[slug])
    return _form_page(
        request,
        form=form,
        title=f"New target of {activity.name}",
        cancel=cancel,
        challenge=activity.challenge,
        activity=activity,
    )


@action_required("edit")
def target_edit(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    target = object_for(
        queryset=Target.objects.select_related("activity__challenge", "activity__experiment"), user=request.user,
        action="edit", pk=pk, activity__challenge__slug=slug,
    )  # fmt: skip
    form = TargetForm(request.POST or None, instance=target, activity=target.activity)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Target {target.place} saved.")
        return redirect("challenges:clock", slug=slug)
    cancel = reverse("challenges:clock", args=[slug])
    return _form_page(
        request,
        form=form,
        title=f"Edit target {target.place} of {target.activity.name}",
        cancel=cancel,
        challenge=target.activity.challenge,
        activity=target.activity,
        delete_url=reverse("challenges:target_delete", args=[slug, pk]),
    )


@require_POST
@action_required("edit")
def target_delete(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    target = object_for(
        queryset=Target.objects.select_related("activity"), user=request.user, action="edit", pk=pk,
        activity__challenge__slug=slug,
    )  # fmt: skip
    place = target.place
    target.delete()
    messages.success(request, f"Target {place} deleted.")
    return redirect("challenges:clock", slug=slug)
