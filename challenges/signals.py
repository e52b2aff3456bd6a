"""Signals of the plan for the apps above it. Saves and deletes of single activities and targets are Django's own
signals; writes in bulk (the plan document's import) send plan_changed with every activity they touched, as it was
before and as it is after (`activities`: unsaved copies carry the old window and experiment)."""

from __future__ import annotations

from django.dispatch import Signal

plan_changed = Signal()
