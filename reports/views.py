"""Site report pages, mounted at /reports/: the reports of a challenge, one report with its comments and review
buttons, the report form (site admins of the site; coordinators), and the challenge's outages (with CSV/JSON
export)."""

from __future__ import annotations

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from challenges.models import Challenge
from challenges.selectors import challenge_for
from challenges.views import read_access
from common.exports import export_requested, table_response
from common.times import iso_utc
from sites.models import Site
from sites.roles import action_reach, sites_for

from . import permissions, selectors, services
from .forms import ReportForms
from .models import SiteReport

OUTAGE_COLUMNS = ["site", "start", "end", "duration", "reason", "report_status", "report_id"]


def _report(request: HttpRequest, slug: str, pk: int) -> SiteReport:
    queryset = SiteReport.objects.select_related("challenge", "site", "author", "accepted_by")
    report = get_object_or_404(permissions.reports_readable_by(user=request.user, queryset=queryset), pk=pk)
    if report.challenge.slug != slug:
        raise Http404("no such report on this challenge")
    return report


@read_access
def report_list(request: HttpRequest, slug: str) -> HttpResponse:
    """The challenge's reports (drafts only to their site's admins and coordinators), and the sites the user may
    still write one for."""
    challenge = challenge_for(slug=slug, user=request.user)
    reports = list(
        permissions.reports_readable_by(user=request.user, queryset=SiteReport.objects.filter(challenge=challenge))
        .select_related("site")
        .annotate(outage_count=Count("outages", distinct=True), problem_count=Count("problems", distinct=True))
        .order_by("site__name")
    )
    reported = set(SiteReport.objects.filter(challenge=challenge).values_list("site_id", flat=True))
    writable = sites_for(user=request.user, action="report").exclude(pk__in=reported).order_by("name")
    context = {
        "challenge": challenge,
        "reports": reports,
        "writable_sites": writable if request.user.is_authenticated else [],
    }
    return render(request, "reports/report_list.html", context)


@read_access
def report_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """A report with its rows and comments; buttons for what the user may do next."""
    report = _report(request, slug, pk)
    user = request.user
    context = {
        "challenge": report.challenge,
        "report": report,
        "rates": report.rates.select_related(
            "target__activity", "target__site", "target__link_from", "target__link_to"
        ),
        "outages": report.outages.all(),
        "problems": report.problems.all(),
        "actions": report.actions.all(),
        "comments": report.comments.select_related("author"),
        "may_edit": permissions.report_write_problem(user=user, report=report) is None,
        "may_submit": permissions.report_write_problem(user=user, report=report) is None
        and report.status in ("draft", "changes-requested"),
        "may_comment": permissions.report_comment_problem(user=user, report=report) is None,
        "may_review": permissions.user_may_review(user=user) and report.status == "submitted",
    }
    return render(request, "reports/report_detail.html", context)


def _form_page(request: HttpRequest, *, challenge: Challenge, site: Site, report: SiteReport | None) -> HttpResponse:
    bound = ReportForms(
        data=request.POST if request.method == "POST" else None,
        challenge=challenge,
        site=site,
        sites=None,
        report=report,
    )
    if request.method == "POST" and bound.is_valid():
        try:
            saved = services.report_save(
                user=request.user,
                challenge=challenge,
                site=site,
                notes=bound.cleaned_notes,
                content=bound.content(),
                report=report,
            )
        except ValidationError as exc:
            bound.add_problems(exc)
        else:
            messages.success(request, f"Report of {site.name} saved.")
            return redirect("reports:detail", challenge.slug, saved.pk)
    context = {"challenge": challenge, "site": site, "report": report, "forms": bound}
    return render(request, "reports/report_form.html", context, status=400 if request.method == "POST" else 200)


def forbidden(request: HttpRequest, message: str) -> HttpResponse:
    """403 with the reason on the page."""
    return render(request, "reports/forbidden.html", {"message": message}, status=403)


def login_first(request: HttpRequest) -> HttpResponse | None:
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    return None


def step_taken(request: HttpRequest, *, call: Callable[[], object], done: str, then: HttpResponse) -> HttpResponse:
    """A report's step (submit, comment, accept, request changes) for a page: a refusal by the access policy is a
    403 with its reason, a step the report's state does not allow is an error message on `then`, else `done` is."""
    try:
        call()
    except PermissionDenied as exc:
        return forbidden(request, str(exc))
    except ValidationError as exc:
        for message in exc.messages:
            messages.error(request, message)
    else:
        messages.success(request, done)
    return then


def report_create(request: HttpRequest, slug: str) -> HttpResponse:
    """A new report of ?site=NAME (or of the one site the user administers)."""
    if (login := login_first(request)) is not None:
        return login
    challenge = challenge_for(slug=slug, user=request.user)
    name = request.GET.get("site", "").strip()
    editable = sites_for(user=request.user, action="report")
    if name:
        site = get_object_or_404(Site, name=name)
    elif not action_reach(user=request.user, action="report").every and editable.count() == 1:
        site = editable.get()
    else:
        raise Http404("say which site: ?site=NAME")
    problem = permissions.site_write_problem(user=request.user, site=site)
    if problem:
        return forbidden(request, problem)
    existing = SiteReport.objects.filter(challenge=challenge, site=site).first()
    if existing is not None:
        messages.info(request, f"{site.name} already has a report on {challenge.name}: here it is.")
        return redirect("reports:detail", challenge.slug, existing.pk)
    return _form_page(request, challenge=challenge, site=site, report=None)


def report_edit(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    if (login := login_first(request)) is not None:
        return login
    report = _report(request, slug, pk)
    problem = permissions.report_write_problem(user=request.user, report=report)
    if problem:
        return forbidden(request, problem)
    return _form_page(request, challenge=report.challenge, site=report.site, report=report)


@require_POST
def report_step(request: HttpRequest, slug: str, pk: int, step: str) -> HttpResponse:
    """submit, comment, accept or request-changes; the text of a comment or review note is POSTed as `text`."""
    if (login := login_first(request)) is not None:
        return login
    report = _report(request, slug, pk)
    text = request.POST.get("text", "")
    steps = {
        "submit": lambda: services.report_submit(user=request.user, report=report),
        "comment": lambda: services.report_comment(user=request.user, report=report, text=text),
        "accept": lambda: services.report_accept(user=request.user, report=report, text=text),
        "request-changes": lambda: services.report_request_changes(user=request.user, report=report, text=text),
    }
    if step not in steps:
        raise Http404(step)
    done = {
        "submit": "Report submitted to the coordinators.",
        "comment": "Comment added.",
        "accept": "Report accepted.",
        "request-changes": "Changes requested from the site's admins.",
    }
    return step_taken(request, call=steps[step], done=done[step], then=redirect("reports:detail", slug, report.pk))


@read_access
def challenge_outages(request: HttpRequest, slug: str) -> HttpResponse:
    """Every outage of the challenge's readable reports; ?format=csv|json exports them (times ISO 8601 UTC,
    durations in seconds)."""
    challenge = challenge_for(slug=slug, user=request.user)
    outages = list(selectors.challenge_outages(challenge=challenge, user=request.user))
    rows = [
        {
            "site": outage.report.site.name,
            "start": iso_utc(outage.start),
            "end": iso_utc(outage.end),
            "duration": int((outage.end - outage.start).total_seconds()),
            "reason": outage.reason,
            "report_status": outage.report.status,
            "report_id": outage.report_id,
        }
        for outage in outages
    ]
    if export_requested(request):
        return table_response(request, name=f"{slug}-outages", columns=OUTAGE_COLUMNS, rows=rows)
    context = {
        "challenge": challenge,
        "outages": outages,
        "list_url": reverse("reports:list", args=[slug]),
    }
    return render(request, "reports/outages.html", context)
