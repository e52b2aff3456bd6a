"""The Django project of the Data Challenge Portal: settings, URLs and the Celery app."""

from .celery import app as celery_app

__all__ = ("celery_app",)
