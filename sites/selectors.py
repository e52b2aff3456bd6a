"""Reads of the registry."""

from __future__ import annotations

from django.db.models import QuerySet

from .models import Experiment, Site


def sites_with_details() -> QuerySet[Site]:
    """Sites with everything the list and detail pages show, in a constant number of queries."""
    return Site.objects.select_related("capacity").prefetch_related("experiments", "endpoints", "network_hosts")


def experiment_names() -> list[str]:
    return list(Experiment.objects.values_list("name", flat=True))
