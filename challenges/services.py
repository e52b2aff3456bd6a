"""Writes of the plan that are not the plan document: checks that raise every problem at once."""

from __future__ import annotations

from common.problems import problems_raise

from . import validation
from .models import Activity, Challenge, Target


def challenge_check(*, challenge: Challenge) -> None:
    """Raise ValidationError with every broken rule of the challenge's own fields."""
    problems_raise(
        validation.challenge_problems(
            start=challenge.start,
            end=challenge.end,
            max_window=challenge.max_window,
            stable_window=challenge.stable_window,
        )
    )


def activity_check(*, activity: Activity) -> None:
    """Raise ValidationError with every broken rule: window, inside the challenge, source serving the experiment."""
    challenge = activity.challenge
    problems_raise(
        validation.activity_problems(
            challenge_start=challenge.start,
            challenge_end=challenge.end,
            start=activity.start,
            end=activity.end,
            experiment=activity.experiment,
            source=activity.source,
            serving=validation.serving_index(),
            ddm_activities=activity.ddm_activities,
        )
    )


def target_check(*, target: Target) -> None:
    """Raise ValidationError with every broken rule, including a duplicate of another target of the activity."""
    problems = validation.target_problems(
        experiment=target.activity.experiment,
        site=target.site,
        direction=target.direction,
        link_from=target.link_from,
        link_to=target.link_to,
        rate=target.rate,
        nominal_rate=target.nominal_rate,
        factors=target.factors,
        serving=validation.serving_index(),
    )
    key = validation.target_key(
        site=target.site, direction=target.direction, link_from=target.link_from, link_to=target.link_to
    )
    siblings = Target.objects.filter(activity=target.activity).exclude(pk=target.pk)
    if any(
        validation.target_key(
            site=other.site, direction=other.direction, link_from=other.link_from, link_to=other.link_to
        )
        == key
        for other in siblings.select_related("site", "link_from", "link_to")
    ):
        problems.append(("site", f"the activity already has a target for {target.place}"))
    problems_raise(problems)
