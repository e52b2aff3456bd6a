"""Experiment report pages, mounted at /reports/: a challenge's experiment reports, one report with the buttons for
what the reader may do next, and its form. Who may read, write and review is reports.experiments' (the access
policy's "view", "narrate" and "review"), as in the API: these pages only call it."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from challenges.models import Challenge
from challenges.selectors import challenge_for
from challenges.views import read_access
from sites.models import Experiment
from sites.roles import action_reach

from .choices import ReportStatus
from .experiments import (
    experiment_report_review,
    experiment_report_save,
    experiment_report_submit,
    experiment_report_write_problem,
    experiment_reports_readable,
    experiment_write_problem,
    text_lines,
    user_may_review,
)
from .forms import ExperimentReportForms
from .models import ExperimentReport
from .views import forbidden, login_first, step_taken


def _report(request: HttpRequest, slug: str, pk: int) -> ExperimentReport:
    queryset = ExperimentReport.objects.select_related("challenge", "experiment", "author", "accepted_by")
    report = get_object_or_404(experiment_reports_readable(user=request.user, queryset=queryset), pk=pk)
    if report.challenge.slug != slug:
        raise Http404("no such experiment report on this challenge")
    return report


def _experiments_writable(request: HttpRequest, challenge: Challenge) -> list[Experiment]:
    """The challenge's experiments without a report yet whose report the user may write."""
    if not request.user.is_authenticated:
        return []
    reach = action_reach(user=request.user, action="narrate")
    planned = Experiment.objects.filter(activities__challenge=challenge).distinct().order_by("name")
    if not reach.every:
        planned = planned.filter(pk__in=reach.experiment_ids)
    return list(planned.exclude(reports__challenge=challenge))


@read_access
def experiment_report_list(request: HttpRequest, slug: str) -> HttpResponse:
    """The challenge's experiment reports the user reads (drafts only to their writers), and the experiments it
    may still write one for."""
    challenge = challenge_for(slug=slug, user=request.user)
    reports = list(
        experiment_reports_readable(user=request.user, queryset=ExperimentReport.objects.filter(challenge=challenge))
        .select_related("experiment")
        .annotate(problem_count=Count("problems", distinct=True), action_count=Count("actions", distinct=True))
        .order_by("experiment__name")
    )
    context = {"challenge": challenge, "reports": reports, "writable": _experiments_writable(request, challenge)}
    return render(request, "reports/experiment_list.html", context)


@read_access
def experiment_report_detail(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    report = _report(request, slug, pk)
    may_edit = experiment_report_write_problem(user=request.user, report=report) is None
    context = {
        "challenge": report.challenge,
        "report": report,
        "problems": report.problems.all(),
        "actions": report.actions.all(),
        "lessons": text_lines(report.lessons),
        "next_steps": text_lines(report.next_steps),
        "may_edit": may_edit,
        "may_submit": may_edit and report.status in (ReportStatus.DRAFT, ReportStatus.CHANGES_REQUESTED),
        "may_review": user_may_review(user=request.user) and report.status == ReportStatus.SUBMITTED,
    }
    return render(request, "reports/experiment_detail.html", context)


def _form_page(
    request: HttpRequest, *, challenge: Challenge, experiment: Experiment, report: ExperimentReport | None
) -> HttpResponse:
    bound = ExperimentReportForms(data=request.POST if request.method == "POST" else None, report=report)
    if request.method == "POST" and bound.is_valid():
        try:
            saved = experiment_report_save(
                user=request.user,
                challenge=challenge,
                experiment=experiment,
                fields=bound.texts(),
                rows=bound.rows(),
                report=report,
            )
        except PermissionDenied as exc:
            return forbidden(request, str(exc))
        except ValidationError as exc:
            bound.add_problems(exc)
        else:
            messages.success(request, f"Report of {experiment.name} saved.")
            return redirect("reports:experiment_detail", challenge.slug, saved.pk)
    context = {"challenge": challenge, "experiment": experiment, "report": report, "forms": bound}
    return render(request, "reports/experiment_form.html", context, status=400 if request.method == "POST" else 200)


def experiment_report_create(request: HttpRequest, slug: str) -> HttpResponse:
    """A new report of ?experiment=NAME (or of the one experiment the user writes for)."""
    if (login := login_first(request)) is not None:
        return login
    challenge = challenge_for(slug=slug, user=request.user)
    name = request.GET.get("experiment", "").strip()
    writable = _experiments_writable(request, challenge)
    if name:
        experiment = get_object_or_404(Experiment, name__iexact=name)
    elif len(writable) == 1 and not action_reach(user=request.user, action="narrate").every:
        experiment = writable[0]
    else:
        raise Http404("say which experiment: ?experiment=NAME")
    problem = experiment_write_problem(user=request.user, experiment=experiment)
    if problem:
        return forbidden(request, problem)
    existing = ExperimentReport.objects.filter(challenge=challenge, experiment=experiment).first()
    if existing is not None:
        messages.info(request, f"{experiment.name} already has a report on {challenge.name}: here it is.")
        return redirect("reports:experiment_detail", challenge.slug, existing.pk)
    return _form_page(request, challenge=challenge, experiment=experiment, report=None)


def experiment_report_edit(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    if (login := login_first(request)) is not None:
        return login
    report = _report(request, slug, pk)
    problem = experiment_report_write_problem(user=request.user, report=report)
    if problem:
        return forbidden(request, problem)
    return _form_page(request, challenge=report.challenge, experiment=report.experiment, report=report)


STEPS = {
    "submit": ("Report submitted to the coordinators.", experiment_report_submit),
    "accept": (
        "Report accepted.",
        lambda *, user, report: experiment_report_review(user=user, report=report, accept=True),
    ),
    "request-changes": (
        "Changes requested from the experiment's contacts.",
        lambda *, user, report: experiment_report_review(user=user, report=report, accept=False),
    ),
}


@require_POST
def experiment_report_step(request: HttpRequest, slug: str, pk: int, step: str) -> HttpResponse:
    """submit (the experiment's writers), accept or request-changes (coordinators)."""
    if (login := login_first(request)) is not None:
        return login
    report = _report(request, slug, pk)
    if step not in STEPS:
        raise Http404(step)
    done, call = STEPS[step]
    return step_taken(
        request,
        call=lambda: call(user=request.user, report=report),
        done=done,
        then=redirect("reports:experiment_detail", slug, report.pk),
    )
