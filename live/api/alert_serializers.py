"""The alerts and the now board as the API gives them (bytes, seconds, bytes per second; ISO 8601 UTC)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from ..choices import AlertKind, AlertState
from ..models import Alert


class AlertSerializer(serializers.ModelSerializer[Alert]):
    """An alert: what, about whom, since when, and who took it on."""

    challenge = serializers.SlugRelatedField[Any](slug_field="slug", read_only=True)
    activity = serializers.SlugRelatedField[Any](slug_field="name", read_only=True, allow_null=True)
    experiment = serializers.SlugRelatedField[Any](slug_field="name", read_only=True, allow_null=True)
    site = serializers.SlugRelatedField[Any](slug_field="name", read_only=True, allow_null=True)
    link = serializers.SerializerMethodField(help_text='{"source", "destination"} site names, or null')
    acknowledged_by = serializers.SlugRelatedField[Any](slug_field="username", read_only=True, allow_null=True)
    silenced_by = serializers.SlugRelatedField[Any](slug_field="username", read_only=True, allow_null=True)
    kind = serializers.ChoiceField(choices=AlertKind.choices, read_only=True)
    state = serializers.ChoiceField(choices=AlertState.choices, read_only=True)

    class Meta:
        model = Alert
        fields = [
            "id",
            "kind",
            "state",
            "subject",
            "challenge",
            "activity",
            "experiment",
            "site",
            "link",
            "target",
            "value",
            "threshold",
            "message",
            "started_at",
            "last_seen_at",
            "resolved_at",
            "acknowledged_by",
            "acknowledged_at",
            "silenced_until",
            "silenced_by",
        ]
        read_only_fields = fields

    def get_link(self, alert: Alert) -> dict[str, str] | None:
        if alert.link_source_id is None or alert.link_destination_id is None:
            return None
        return {"source": alert.link_source.name, "destination": alert.link_destination.name}  # type: ignore[union-attr]


class SilenceSerializer(serializers.Serializer[Any]):
    until = serializers.DateTimeField(allow_null=True, help_text="no deliveries before this time; null lifts it")


class NowLinkSerializer(serializers.Serializer[Any]):
    source = serializers.CharField()
    destination = serializers.CharField()


class NowTrendPointSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="the 10 minutes from this time")
    rate = serializers.FloatField(help_text="bytes per second")


class TargetNowSerializer(serializers.Serializer[Any]):
    target = serializers.IntegerField()
    activity = serializers.CharField()
    experiment = serializers.CharField()
    site = serializers.CharField(allow_null=True)
    link = NowLinkSerializer(allow_null=True)
    direction = serializers.CharField(allow_null=True)
    target_rate = serializers.FloatField(help_text="bytes per second")
    window_start = serializers.DateTimeField()
    window_end = serializers.DateTimeField()
    volume = serializers.FloatField(help_text="bytes inside the window so far")
    last_15min_rate = serializers.FloatField()
    last_hour_rate = serializers.FloatField()
    required_rate = serializers.FloatField(
        allow_null=True, help_text="(target_rate x window_seconds - volume) / remaining_seconds"
    )
    projected_average_rate = serializers.FloatField(
        allow_null=True, help_text="(volume + last_hour_rate x remaining_seconds) / window_seconds"
    )
    verdict = serializers.ChoiceField(choices=["met", "on track", "at risk", "will miss", "not started", "ended"])
    final_verdict = serializers.CharField(allow_null=True, help_text="the results table's verdict once ended")
    trend = NowTrendPointSerializer(many=True, help_text="the last 6 hours as 10-minute rates")


class ExperimentTrafficSerializer(serializers.Serializer[Any]):
    experiment = serializers.CharField()
    in_rate_last_hour = serializers.FloatField()
    out_rate_last_hour = serializers.FloatField()


class SiteNowSerializer(serializers.Serializer[Any]):
    site = serializers.CharField()
    in_rate_last_hour = serializers.FloatField()
    out_rate_last_hour = serializers.FloatField()
    experiments = ExperimentTrafficSerializer(many=True)


class SourceNowSerializer(serializers.Serializer[Any]):
    source = serializers.ChoiceField(choices=["fts", "rucio", "perfsonar", "runs"])
    latest_record_end = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.FloatField(allow_null=True)
    records_last_hour = serializers.IntegerField()
    consumer_lag_seconds = serializers.FloatField(
        allow_null=True, help_text="the STOMP consumer's wait for its oldest message not yet stored; null: none runs"
    )


class NowBoardSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="the board's minute (UTC): every rate ends here")
    targets = TargetNowSerializer(many=True)
    sites = SiteNowSerializer(many=True)
    sources = SourceNowSerializer(many=True)
    alerts = AlertSerializer(many=True)
