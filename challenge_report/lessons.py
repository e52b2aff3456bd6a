"""Lessons learned and next steps: gathered from what experiments and sites told (their reports), and the
coordinators' own text."""

from __future__ import annotations

from typing import Any

from challenges.models import Challenge


def narratives_attach(*, challenge: Challenge, user: Any, experiments: list[dict[str, Any]]) -> None:
    """Each experiment's entry gets its narrative (none yet: experiments' reports are not kept)."""


def lessons_section(*, challenge: Challenge, user: Any, experiments: list[dict[str, Any]]) -> dict[str, Any]:
    return {"lessons": [], "next_steps": [], "coordinators": None}
