"""The Celery application: broker and result backend from the environment, tasks from every app."""

import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

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
