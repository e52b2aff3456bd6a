"""What experiments told (their reports: reports.experiments), in the report: each experiment's narrative beside its
figures, and their lessons and next steps gathered in one section with the coordinators' own (ReportNotes). Drafts
are left out: a draft is not what an experiment said yet."""

from __future__ import annotations

from typing import Any

from challenges.models import Challenge
from reports.choices import ReportStatus
from reports.experiments import experiment_reports_readable, text_lines
from reports.models import ExperimentReport
from reports.rendering import markdown_render

from .models import ReportNotes


def experiment_reports(*, challenge: Challenge, user: Any) -> dict[str, ExperimentReport]:
    """{experiment name: its report} of the challenge that the reader may read, drafts left out."""
    reports = experiment_reports_readable(
        user=user, queryset=ExperimentReport.objects.filter(challenge=challenge).exclude(status=ReportStatus.DRAFT)
    )
    return {
        report.experiment.name: report
        for report in reports.select_related("experiment").prefetch_related("problems", "actions")
    }


def _narrative(report: ExperimentReport) -> dict[str, Any]:
    return {
        "status": report.status,
        "narrative": report.narrative,
        "narrative_html": report.narrative_html,
        "problems": [
            {"category": p.category, "ticket": p.ticket, "ticket_url": p.ticket_url, "description": p.description}
            for p in report.problems.all()
        ],
        "actions": [{"taken_at": a.taken_at, "description": a.description} for a in report.actions.all()],
    }


def narratives_attach(*, challenge: Challenge, user: Any, experiments: list[dict[str, Any]]) -> None:
    """Each experiment's entry gets its narrative (None when it told nothing yet)."""
    reports = experiment_reports(challenge=challenge, user=user)
    for entry in experiments:
        report = reports.get(entry["experiment"])
        entry["narrative"] = _narrative(report) if report else None


def _lines(who: str, text: str) -> list[dict[str, str]]:
    return [{"who": who, "text": line} for line in text_lines(text)]


def lessons_section(*, challenge: Challenge, user: Any, experiments: list[dict[str, Any]]) -> dict[str, Any]:
    """The coordinators' lessons and next steps, and the experiments', one a line, by experiment."""
    reports = experiment_reports(challenge=challenge, user=user)
    lessons, next_steps = [], []
    for name in sorted(reports, key=str.lower):
        lessons += _lines(name, reports[name].lessons)
        next_steps += _lines(name, reports[name].next_steps)
    notes = ReportNotes.objects.filter(challenge=challenge).first()
    coordinators = None
    if notes is not None and (notes.lessons or notes.next_steps):
        coordinators = {
            "lessons": notes.lessons,
            "lessons_html": str(markdown_render(notes.lessons)),
            "next_steps": notes.next_steps,
            "next_steps_html": str(markdown_render(notes.next_steps)),
        }
    return {"lessons": lessons, "next_steps": next_steps, "coordinators": coordinators}
