"""The rules of a site report, in one place for the forms, the API and the admin.

Each function returns every problem it finds as (field, message) pairs; an empty list means valid.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from challenges.models import Challenge, Target
from common.problems import Problem
from sites.models import Site


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"


def span_problems(
    *, challenge: Challenge, start: datetime | None, end: datetime | None, what: str = "the window"
) -> list[Problem]:
    """An end after the start, and the whole window inside the challenge's span."""
    problems: list[Problem] = []
    if start is None or end is None:
        return problems
    if end <= start:
        problems.append(("end", f"the end ({_utc(end)}) must be after the start ({_utc(start)})"))
    if start < challenge.start:
        problems.append(
            ("start", f"{what} starts before the challenge does ({_utc(challenge.start)}): report only its span")
        )
    if end > challenge.end:
        problems.append(("end", f"{what} ends after the challenge does ({_utc(challenge.end)}): report only its span"))
    return problems


def outage_problems(
    *, challenge: Challenge, start: datetime | None, end: datetime | None, reason: str
) -> list[Problem]:
    problems = span_problems(challenge=challenge, start=start, end=end, what="the outage")
    if not reason.strip():
        problems.append(("reason", "say why the site was out (e.g. 'dCache pool nodes rebooted')"))
    return problems


def rate_problems(
    *,
    challenge: Challenge,
    site: Site,
    target: Target | None,
    label: str,
    rate: float | None,
    start: datetime | None,
    end: datetime | None,
) -> list[Problem]:
    """A positive rate over a window inside the challenge, for one of its targets at this site or with a label."""
    problems = span_problems(challenge=challenge, start=start, end=end, what="the rate's window")
    if rate is not None and not rate > 0:
        problems.append(("rate", "a rate must be positive (bytes per second)"))
    if target is None and not label.strip():
        problems.append(("label", "name what was measured, or choose one of the challenge's targets"))
    if target is not None:
        if target.activity.challenge_id != challenge.pk:
            problems.append(("target", f"target {target.pk} belongs to another challenge"))
        elif site.pk not in (target.site_id, target.link_from_id, target.link_to_id):
            problems.append(("target", f"target {target.place} does not involve {site.name}"))
    return problems


def problem_problems(*, category: str, description: str) -> list[Problem]:
    problems: list[Problem] = []
    if not category:
        problems.append(("category", "choose a category"))
    if not description.strip():
        problems.append(("description", "describe the problem"))
    return problems


def action_problems(*, challenge: Challenge, description: str, taken_at: datetime | None) -> list[Problem]:
    problems: list[Problem] = []
    if not description.strip():
        problems.append(("description", "say what was done (e.g. 'raised MTU to 9000')"))
    return problems


def content_problems(*, challenge: Challenge, site: Site, content: dict[str, Any]) -> list[Problem]:
    """Every problem of a report's rows, each placed by its list and index: `outages[1].end`."""
    problems: list[Problem] = []

    def placed(kind: str, index: int, found: list[Problem]) -> None:
        problems.extend((f"{kind}[{index}].{field}", message) for field, message in found)

    for index, row in enumerate(content.get("rates", [])):
        placed(
            "rates",
            index,
            rate_problems(
                challenge=challenge,
                site=site,
                target=row.get("target"),
                label=row.get("label", ""),
                rate=row.get("rate"),
                start=row.get("start"),
                end=row.get("end"),
            ),
        )
    for index, row in enumerate(content.get("outages", [])):
        placed(
            "outages",
            index,
            outage_problems(challenge=challenge, start=row.get("start"), end=row.get("end"), reason=row["reason"]),
        )
    for index, row in enumerate(content.get("problems", [])):
        placed("problems", index, problem_problems(category=row["category"], description=row["description"]))
    for index, row in enumerate(content.get("actions", [])):
        placed(
            "actions",
            index,
            action_problems(challenge=challenge, description=row["description"], taken_at=row.get("taken_at")),
        )
    return problems
