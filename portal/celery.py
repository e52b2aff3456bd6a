"""The Celery application: broker and result backend from the environment, tasks from every app."""

import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal", include=["portal.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def tokens_redacted_in_logs(logger: Any, *args: Any, **kwargs: Any) -> None:
    """A worker's log handlers (Celery's own, not Django's LOGGING) take tokens out of every record as well."""
    from measure.tokens import TokenRedactingFilter

    for handler in logger.handlers:
        handler.addFilter(TokenRedactingFilter())


@worker_init.connect
def gfal2_plugins_loaded(sender: Any = None, **kwargs: Any) -> None:
    """A worker with a threads pool loads gfal2's plugins (XRootD's client among them) once, before its first task:
    the site agent's first context, made while another thread started iperf3, once hung in that loading for good
    (agent/loop.py), and a worker runs a network probe beside copies the same way. A forked pool's children load
    their own (XRootD's client is not made to be forked once loaded); a machine without gfal2 runs no copies."""
    if "thread" not in str(getattr(sender, "pool_cls", "")).lower():
        return
    try:
        from measure.context import gfal2_context_new
    except ImportError:  # gfal2 is not installed here
        return
    gfal2_context_new()
