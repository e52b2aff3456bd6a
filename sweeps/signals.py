"""A step's run that ended (runs.ends.run_end), or whose copies were kept or deleted (runs.copies), sends its sweep's
advance once the transaction commits.

runs/ sits below sweeps/ and never imports it: it sends its own signals (runs.signals) explicitly from the one writer
of a run's end and of its copies' fate, and this module listens. Unlike Django's post_save, which a queryset
`.update()` or a save of other fields skips, they come with every end, whichever path ended the run.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.dispatch import receiver

from runs.models import Run
from runs.signals import run_copies_settled, run_ended

from . import services
from .choices import StepState
from .models import SweepStep


@receiver(run_ended, dispatch_uid="sweeps-run-ended")
@receiver(run_copies_settled, dispatch_uid="sweeps-run-copies-settled")
def step_run_over(sender: Any, run: Run, **kwargs: Any) -> None:
    sweep_id = (
        SweepStep.objects.filter(run_id=run.pk, state=StepState.RUNNING).values_list("sweep_id", flat=True).first()
    )
    if sweep_id is not None:
        transaction.on_commit(lambda: services.advance_send(sweep_id))
