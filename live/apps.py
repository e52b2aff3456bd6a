from django.apps import AppConfig


class LiveConfig(AppConfig):
    """The challenge week as it happens: the now board, projections, alerts, subscriptions and deliveries."""

    name = "live"
