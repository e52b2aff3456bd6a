"""Alert subscriptions and deliveries under /api/v1/alerts/: coordinators see and manage every subscription, anyone
else their own, subscribing only to what the access policy lets them read; the delivery log of the alerts a user
may read (another's subscriptions' deliveries are a coordinator's to see)."""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from rest_framework import viewsets

from common.filters import IdFilter
from common.services import service_call

from ..models import AlertDelivery, AlertSubscription
from ..subscriptions import deliveries_visible_to, subscription_create, subscription_update, subscriptions_visible_to
from .serializers import AlertDeliverySerializer, AlertSubscriptionSerializer


class AlertSubscriptionViewSet(viewsets.ModelViewSet[AlertSubscription]):
    """Where alerts go: a webhook (JSON or Slack/Mattermost text) or an e-mail address, for a challenge (or all)
    and some experiments, sites and kinds (empty lists take all)."""

    queryset = AlertSubscription.objects.none()
    serializer_class = AlertSubscriptionSerializer
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[AlertSubscription]:
        return subscriptions_visible_to(user=self.request.user).order_by("name", "id")

    def perform_create(self, serializer: Any) -> None:
        fields = dict(serializer.validated_data)
        serializer.instance = service_call(lambda: subscription_create(user=self.request.user, fields=fields))

    def perform_update(self, serializer: Any) -> None:
        fields, subscription = dict(serializer.validated_data), serializer.instance
        serializer.instance = service_call(
            lambda: subscription_update(subscription=subscription, user=self.request.user, fields=fields)
        )


class AlertDeliveryFilter(django_filters.FilterSet):
    alert = IdFilter(field_name="alert_id", help_text="the alert's id")

    class Meta:
        model = AlertDelivery
        fields = ["alert"]


class AlertDeliveryViewSet(viewsets.ReadOnlyModelViewSet[AlertDelivery]):
    """Each alert's deliveries: to which subscription, for which state, how many attempts, the answer and the
    error."""

    queryset = AlertDelivery.objects.none()
    serializer_class = AlertDeliverySerializer
    filterset_class = AlertDeliveryFilter

    def get_queryset(self) -> QuerySet[AlertDelivery]:
        return deliveries_visible_to(user=self.request.user).order_by("-created_at", "-id")
