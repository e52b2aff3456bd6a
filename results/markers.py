"""Marks that apps above results put on a target's rate plot (live's alerts, say): results imports none of them,
so each registers a provider when Django starts (its AppConfig.ready) and the target page asks every provider."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from challenges.models import Target


@dataclass(frozen=True)
class PlotMark:
    """A span of time on a target's plot with what happened then (`end` None: still going)."""

    start: datetime
    end: datetime | None
    label: str
    kind: str = "alert"


MarkProvider = Callable[..., list[PlotMark]]
_PROVIDERS: list[MarkProvider] = []


def target_marks_register(provider: MarkProvider) -> None:
    """Called once per provider from an AppConfig.ready(): provider(*, target, user, start, end) -> marks."""
    if provider not in _PROVIDERS:
        _PROVIDERS.append(provider)


def target_marks(*, target: Target, user: Any, start: datetime, end: datetime) -> list[PlotMark]:
    """Every registered provider's marks of the target between start and end that `user` may read."""
    marks: list[PlotMark] = []
    for provider in _PROVIDERS:
        marks.extend(provider(target=target, user=user, start=start, end=end))
    return sorted(marks, key=lambda mark: mark.start)
