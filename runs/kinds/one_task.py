"""What the one-task kinds (staging, network, cache, io) share: their plan. A run of an activity takes what is
not given from the plan (the kind's `plan_defaults`: a host, an endpoint, the files to recall), then every field
is checked by the kind's parameters (`check`); the site whose worker runs it and its deadline follow from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from .base import P, ProbeKind, RunPlan
from .fields import Problems

if TYPE_CHECKING:
    from challenges.models import Activity
    from sites.models import Experiment, Site

DEFAULT_DEADLINE = 3600.0  # seconds, for a probe whose parameters say nothing of its length


class OneTaskKind(ProbeKind[P]):
    """A kind whose whole probe is one task (runs.tasks.run_prepare -> run_probe -> `probe`)."""

    needs: ClassVar[str] = ""  # the field the plan finds for an activity's run when it is not given

    def plan_defaults(
        self, activity: Activity, given: dict[str, Any], problems: Problems, experiment: Experiment | None
    ) -> dict[str, Any]:
        """What the activity's plan gives for `needs` (and what goes with it); problems when it cannot."""
        return {}

    def given_defaults(self, activity: Activity | None) -> dict[str, Any]:
        """Defaults taken from the activity for every run of it (an io run's file size)."""
        return {}

    def planned(
        self, parameters: P, *, activity: Activity | None, experiment: Experiment | None
    ) -> tuple[Site | None, float]:
        """The site whose worker runs it and its deadline (seconds), from its parameters."""
        return (activity.source if activity else None), DEFAULT_DEADLINE

    def plan(
        self,
        *,
        kind: str,
        activity: Activity | None,
        given: dict[str, Any],
        problems: Problems,
        experiment: Experiment | None,
    ) -> RunPlan:
        why_missing: list[str] = []  # why the plan could not give it: said instead of the generic "required"
        if activity is not None and self.needs and given.get(self.needs) is None:
            given = {**self.plan_defaults(activity, given, problems, experiment), **given}
            given = {name: value for name, value in given.items() if value is not None}
            why_missing = list(problems.errors.get(self.needs, []))
        given = {**self.given_defaults(activity), **given}
        values = self.Parameters.check(given, problems)
        parameters = self.Parameters(**values)
        site, deadline = self.planned(parameters, activity=activity, experiment=experiment)
        if why_missing:
            problems.errors[self.needs] = why_missing
        stored = {name: value for name, value in parameters.to_dict().items() if name in values}
        return RunPlan(parameters=stored, files=[], site=site, experiment=experiment, deadline_seconds=deadline)
