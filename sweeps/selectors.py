"""Reads of sweeps for the pages and the API: the sweeps a user may read."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from .models import Sweep, SweepStep
from .tables import STEP_RELATED


def sweeps_visible_to(*, user: Any) -> QuerySet[Sweep]:
    """The sweeps a user may read (the access policy: Sweep.objects.restrict), with their steps; user None: every
    sweep, for object_for to restrict."""
    steps = SweepStep.objects.select_related(*STEP_RELATED).order_by("index")
    return (
        Sweep.objects.restrict(user)
        .select_related("activity", "created_by")
        .prefetch_related(Prefetch("steps", queryset=steps, to_attr="step_list"))
    )
