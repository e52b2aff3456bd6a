"""The filters of the transfer records list, the same on the API (results.api.records) and the page
(results.matrix.views)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from challenges.models import Challenge
from common.filters import IdFilter, WholeNumberFilter

from .choices import ErrorCategory, RecordState
from .models import TransferRecord


class RecordFilter(django_filters.FilterSet):
    """The filters of the records list, the same on the API and the page. `challenge` keeps the records that count
    for the challenge's activities (results.store.attribution), `activity` those of one activity, `run` one run's."""

    challenge = django_filters.CharFilter(method="filter_challenge", label="challenge (slug)")
    source = django_filters.CharFilter(field_name="source_site__name", lookup_expr="iexact", label="source site")
    destination = django_filters.CharFilter(
        field_name="destination_site__name", lookup_expr="iexact", label="destination site"
    )
    experiment = django_filters.CharFilter(field_name="experiment__name", lookup_expr="iexact")
    mode = django_filters.CharFilter()
    concurrency = WholeNumberFilter()
    state = django_filters.ChoiceFilter(choices=RecordState.choices)
    category = django_filters.ChoiceFilter(field_name="error_category", choices=ErrorCategory.choices)
    activity = IdFilter(field_name="activity_id", label="activity (id)")
    run = IdFilter(field_name="run_id", label="run (id)")

    class Meta:
        model = TransferRecord
        fields = [
            "challenge",
            "activity",
            "run",
            "source",
            "destination",
            "experiment",
            "mode",
            "concurrency",
            "state",
            "category",
        ]

    def filter_challenge(self, queryset: QuerySet[TransferRecord], name: str, slug: str) -> QuerySet[TransferRecord]:
        # A slug no challenge has keeps no record (a filter, as `source=` of an unknown site): not a 400.
        value = Challenge.objects.filter(slug=slug).first()
        if value is None:
            return queryset.none()
        # The activities' ids, not a join: the planner then knows how many records they hold (a join to the
        # activities made it sort every record of the challenge for a first page of 100).
        return queryset.filter(activity_id__in=list(value.activities.values_list("id", flat=True)))
