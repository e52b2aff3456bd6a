from django.apps import AppConfig


class LiveConfig(AppConfig):
    """The challenge week as it happens: the now board, projections, alerts, subscriptions and deliveries."""

    name = "live"

    def ready(self) -> None:
        # The target plots (results, a floor below) show the alerts of their target as marks.
        from results.markers import target_marks_register

        from .selectors import alert_marks

        target_marks_register(alert_marks)
