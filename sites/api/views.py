"""Registry API: thin viewsets; who may write what is decided by sites.permissions and the querysets."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from sites import documents, services
from sites.filters import CapacityFilter, NetworkHostFilter, SiteFilter, StorageEndpointFilter
from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint
from sites.permissions import IsCoordinator, RegistryPermission, scope_for_write

from .serializers import (
    CapacitySerializer,
    ExperimentSerializer,
    NetworkHostSerializer,
    SiteSerializer,
    StorageEndpointSerializer,
)


class ScopedWriteMixin:
    """Unsafe requests see only the rows the user may change: another site's row is a 404, not a 403."""

    site_lookup = "site"

    def get_queryset(self) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset()  # type: ignore[misc]
        request: Request = self.request  # type: ignore[attr-defined]
        return (
            scope_for_write(queryset=queryset, user=request.user, site_lookup=self.site_lookup)
            if (request.method not in ("GET", "HEAD", "OPTIONS"))
            else queryset
        )


class ExperimentViewSet(viewsets.ModelViewSet[Experiment]):
    """Experiments (VOs). Everyone reads; coordinators write."""

    queryset = Experiment.objects.all()
    serializer_class = ExperimentSerializer
    permission_classes = [RegistryPermission]
    filterset_fields = ["name"]


class SiteViewSet(ScopedWriteMixin, viewsets.ModelViewSet[Site]):
    """Sites with their experiments, capacity, endpoint URLs and network hosts."""

    queryset = Site.objects.select_related("capacity").prefetch_related("experiments", "endpoints", "network_hosts")
    serializer_class = SiteSerializer
    permission_classes = [RegistryPermission]
    filterset_class = SiteFilter
    site_lookup = "pk"

    @extend_schema(
        request={"application/json": dict, "application/yaml": dict},
        responses={
            200: OpenApiResponse(description="counts of created and updated rows"),
            400: OpenApiResponse(description='{"errors": [{"place": "sites[0].tier", "error": "..."}]}'),
        },
    )
    @action(detail=False, methods=["post"], url_path="import", permission_classes=[IsCoordinator])
    def import_document(self, request: Request) -> Response:
        """Upsert the sites document (JSON or YAML), all or nothing: any error lists every problem by its
        place and stores nothing."""
        try:
            document = documents.sites_document_load(text=request.body, content_type=request.content_type)
            summary = services.sites_import(document=document)
        except documents.SitesDocumentError as exc:
            return Response({"errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST)
        return Response(summary.as_dict())

    @extend_schema(responses={200: OpenApiResponse(description="the sites document")})
    @action(detail=False, methods=["get"], url_path="export", permission_classes=[IsAuthenticated])
    def export_document(self, request: Request) -> Response:
        """The registry as a sites document (the shape import takes)."""
        return Response(services.sites_export(sites=self.filter_queryset(self.get_queryset())))


class StorageEndpointViewSet(ScopedWriteMixin, viewsets.ModelViewSet[StorageEndpoint]):
    queryset = StorageEndpoint.objects.select_related("site").prefetch_related("experiments")
    serializer_class = StorageEndpointSerializer
    permission_classes = [RegistryPermission]
    filterset_class = StorageEndpointFilter


class NetworkHostViewSet(ScopedWriteMixin, viewsets.ModelViewSet[NetworkHost]):
    queryset = NetworkHost.objects.select_related("site")
    serializer_class = NetworkHostSerializer
    permission_classes = [RegistryPermission]
    filterset_class = NetworkHostFilter


class CapacityViewSet(ScopedWriteMixin, viewsets.ModelViewSet[Capacity]):
    queryset = Capacity.objects.select_related("site").order_by("site__name")
    serializer_class = CapacitySerializer
    permission_classes = [RegistryPermission]
    filterset_class = CapacityFilter
