"""Experiment reports: who may read and write them (the access policy's "narrate" and "review", sites.roles) and
their writes: save (with problems and actions, all or nothing), submit, accept, ask for changes.

Reading: every reader of the experiment (the access policy's "view") reads its submitted and accepted reports; a
draft only those who may write it. Writing ("narrate"): the experiment's DDM role writes ITS experiment's report
until accepted; coordinators everything. Reviewing ("review"): coordinators. A refusal raises PermissionDenied
saying why; bad content ValidationError by field, and nothing is stored."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from challenges.models import Challenge
from sites.models import Experiment
from sites.roles import action_reach, user_may

from .choices import ReportStatus
from .models import ExperimentAction, ExperimentProblem, ExperimentReport

ROW_MODELS: dict[str, Any] = {"problems": ExperimentProblem, "actions": ExperimentAction}
ROW_FIELDS = {"problems": ("category", "ticket", "description"), "actions": ("description", "taken_at")}


def text_lines(text: str) -> list[str]:
    """A report's lessons or next steps, one a line, without list marks ("- ", "* ") or blank lines: as its page and
    the challenge report list them."""
    return [line.strip(" -*\t") for line in text.splitlines() if line.strip(" -*\t")]


def experiment_reports_readable(*, user: Any, queryset: QuerySet[ExperimentReport] | None = None) -> Any:
    """The experiment reports the user may read: those of experiments it reads, drafts only where it may write."""
    queryset = ExperimentReport.objects.all() if queryset is None else queryset
    readable = queryset.restrict(user)  # type: ignore[attr-defined]
    writable = ExperimentReport.objects.restrict(user, "narrate").values("pk")  # type: ignore[attr-defined]
    return readable.filter(~Q(status=ReportStatus.DRAFT) | Q(pk__in=writable))


def experiment_write_problem(*, user: Any, experiment: Experiment) -> str | None:
    """Why the user may not write this experiment's report, or None when they may."""
    reach = action_reach(user=user, action="narrate")
    if reach.every or experiment.pk in reach.experiment_ids:
        return None
    return f"Only {experiment.name}'s contacts (its DDM role) or a coordinator write {experiment.name}'s report."


def experiment_report_write_problem(*, user: Any, report: ExperimentReport) -> str | None:
    problem = experiment_write_problem(user=user, experiment=report.experiment)
    if problem is None and report.status == ReportStatus.ACCEPTED and not user_may_review(user=user):
        return "This report was accepted: only a coordinator may change it now."
    return problem


def user_may_review(*, user: Any) -> bool:
    """Accepting a report, or asking for changes, is for coordinators (the access policy's "review")."""
    return user_may(user=user, action="review")


def experiment_report_save(
    *,
    user: Any,
    challenge: Challenge,
    experiment: Experiment,
    fields: dict[str, str],
    rows: dict[str, list[dict[str, Any]]],
    report: ExperimentReport | None = None,
) -> ExperimentReport:
    """Create the experiment's report on the challenge (report=None) or change it: `fields` its texts (narrative,
    lessons, next_steps), `rows` the full lists of "problems" and "actions" (a kind left out keeps its rows)."""
    if report is None:
        problem = experiment_write_problem(user=user, experiment=experiment)
    else:
        problem = experiment_report_write_problem(user=user, report=report)
        if problem is None and (experiment.pk != report.experiment_id or challenge.pk != report.challenge_id):
            problem = "A report stays with its experiment and challenge; write a new one for another."
    if problem:
        raise PermissionDenied(problem)
    if not challenge.activities.filter(experiment=experiment).exists():  # type: ignore[attr-defined]
        raise ValidationError({"experiment": f"{experiment.name} has no activity in {challenge.name}"})
    exists = ExperimentReport.objects.filter(challenge=challenge, experiment=experiment).exists()
    if report is None and exists:
        raise ValidationError({"experiment": f"{experiment.name} already has a report on {challenge.name}"})
    try:
        with transaction.atomic():
            if report is None:
                report = ExperimentReport.objects.create(
                    challenge=challenge, experiment=experiment, author=user, **fields
                )
            elif fields:
                for name, value in fields.items():
                    setattr(report, name, value)
                report.save(update_fields=[*fields, "updated_at"])
            for kind, items in rows.items():
                model = ROW_MODELS[kind]
                model.objects.filter(report=report).delete()
                model.objects.bulk_create(
                    [model(report=report, **{k: item.get(k) for k in ROW_FIELDS[kind] if k in item}) for item in items]
                )
    except IntegrityError as exc:  # another request made it meanwhile
        raise ValidationError({"experiment": f"{experiment.name} already has a report on {challenge.name}"}) from exc
    return report


def experiment_report_submit(*, user: Any, report: ExperimentReport) -> ExperimentReport:
    problem = experiment_report_write_problem(user=user, report=report)
    if problem:
        raise PermissionDenied(problem)
    if report.status not in (ReportStatus.DRAFT, ReportStatus.CHANGES_REQUESTED):
        raise ValidationError({"status": f"this report is {report.get_status_display()}; only a draft is submitted"})
    report.status, report.submitted_at = ReportStatus.SUBMITTED, timezone.now()
    report.save(update_fields=["status", "submitted_at", "updated_at"])
    return report


def experiment_report_review(*, user: Any, report: ExperimentReport, accept: bool) -> ExperimentReport:
    """A coordinator accepts a submitted report, or sends it back for changes."""
    if not user_may_review(user=user):
        raise PermissionDenied("Only coordinators accept reports or ask for changes.")
    if report.status != ReportStatus.SUBMITTED:
        raise ValidationError(
            {"status": f"this report is {report.get_status_display()}; only a submitted report is reviewed"}
        )
    if accept:
        report.status, report.accepted_at, report.accepted_by = ReportStatus.ACCEPTED, timezone.now(), user
    else:
        report.status = ReportStatus.CHANGES_REQUESTED
    report.save(update_fields=["status", "accepted_at", "accepted_by", "updated_at"])
    return report
