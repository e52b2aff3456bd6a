"""A step's run saved in its end (or its copies settled) sends its sweep's advance once the transaction commits."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from runs.choices import RUN_ENDED
from runs.models import Run

from . import services
from .choices import StepState
from .models import SweepStep

WATCHED = {"state", "copies"}


@receiver(post_save, sender=Run, dispatch_uid="sweeps-run-saved")
def run_saved(sender: Any, instance: Run, update_fields: Any = None, **kwargs: Any) -> None:
    if instance.state not in RUN_ENDED or (update_fields is not None and not WATCHED & set(update_fields)):
        return
    sweep_id = (
        SweepStep.objects.filter(run_id=instance.pk, state=StepState.RUNNING).values_list("sweep_id", flat=True).first()
    )
    if sweep_id is not None:
        transaction.on_commit(lambda: services.advance_send(sweep_id))
