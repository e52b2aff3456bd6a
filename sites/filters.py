"""Filters of the registry lists (API and pages)."""

from __future__ import annotations

import django_filters
from django.db.models import QuerySet

from common.filters import WholeNumberFilter

from .choices import EndpointKind, Implementation
from .models import Capacity, NetworkHost, Site, StorageEndpoint


class SiteFilter(django_filters.FilterSet):
    experiment = django_filters.CharFilter(field_name="experiments__name", lookup_expr="iexact", distinct=True)
    tier = WholeNumberFilter()
    country = django_filters.CharFilter(lookup_expr="iexact")
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Site
        fields = ["experiment", "tier", "country", "name"]


class StorageEndpointFilter(django_filters.FilterSet):
    site = django_filters.CharFilter(field_name="site__name")
    kind = django_filters.ChoiceFilter(choices=EndpointKind.choices)
    implementation = django_filters.ChoiceFilter(choices=Implementation.choices)
    host = django_filters.CharFilter(lookup_expr="iexact")
    scheme = django_filters.CharFilter()
    rse = django_filters.CharFilter(field_name="rse_names", lookup_expr="contains", method="filter_rse")

    class Meta:
        model = StorageEndpoint
        fields = ["site", "kind", "implementation", "host", "scheme", "rse"]

    def filter_rse(self, queryset: QuerySet[StorageEndpoint], name: str, value: str) -> QuerySet[StorageEndpoint]:
        return queryset.filter(rse_names__contains=[value])


class NetworkHostFilter(django_filters.FilterSet):
    site = django_filters.CharFilter(field_name="site__name")

    class Meta:
        model = NetworkHost
        fields = ["site"]


class CapacityFilter(django_filters.FilterSet):
    site = django_filters.CharFilter(field_name="site__name")

    class Meta:
        model = Capacity
        fields = ["site"]
