"""The alerts and the now board as the API gives them (bytes, seconds, bytes per second; ISO 8601 UTC)."""

from __future__ import annotations

import copy
from typing import Any

from rest_framework import serializers

from results.api.views import RATE_ROW_FIELDS
from results.choices import Verdict

from ...choices import AlertKind, AlertState
from ...models import Alert


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


class NowTrendPointSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="the 10 minutes from this time")
    rate = serializers.FloatField(help_text="bytes per second")


# The same row as the rates API's (results.targets.figures.figures_row), with the trend and two older names; built as
# drf-spectacular builds its inline serializers (the metaclass collects the fields).
TargetNowSerializer = type(
    "TargetNowSerializer",
    (serializers.Serializer,),
    {
        **{name: copy.deepcopy(field) for name, field in RATE_ROW_FIELDS.items()},
        "target": serializers.IntegerField(help_text="the target's id (as `id`)"),
        "final_verdict": serializers.ChoiceField(
            choices=Verdict.choices, allow_null=True, help_text="the verdict once the window has ended (as `verdict`)"
        ),
        "trend": NowTrendPointSerializer(many=True, help_text="the last 6 hours as 10-minute rates"),
    },
)


class ExperimentTrafficSerializer(serializers.Serializer[Any]):
    experiment = serializers.CharField()
    in_rate_last_hour = serializers.FloatField()
    out_rate_last_hour = serializers.FloatField()


class SiteNowSerializer(serializers.Serializer[Any]):
    site = serializers.CharField()
    in_rate_last_hour = serializers.FloatField(help_text="the challenge's activities only, B/s")
    out_rate_last_hour = serializers.FloatField(help_text="the challenge's activities only, B/s")
    experiments = ExperimentTrafficSerializer(many=True)
    outside_in_rate_last_hour = serializers.FloatField(help_text="what came in for no activity (ad hoc runs), B/s")
    outside_out_rate_last_hour = serializers.FloatField(help_text="what went out for no activity, B/s")


class SourceNowSerializer(serializers.Serializer[Any]):
    source = serializers.ChoiceField(choices=["fts", "rucio", "perfsonar", "runs"])
    latest_record_end = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.FloatField(allow_null=True)
    records_last_hour = serializers.IntegerField()
    consumer_lag_seconds = serializers.FloatField(
        allow_null=True, help_text="the STOMP consumer's wait for its oldest message not yet stored; null: none runs"
    )


class AgentNowSerializer(serializers.Serializer[Any]):
    site = serializers.CharField()
    name = serializers.CharField()
    version = serializers.CharField(help_text="as the agent last said")
    kinds = serializers.ListField(child=serializers.CharField(), help_text="probe kinds it runs")
    in_flight = serializers.IntegerField(help_text="jobs it was running when it last reported")
    last_seen = serializers.DateTimeField(allow_null=True, help_text="its last call to the portal; null: never")
    age_seconds = serializers.FloatField(help_text="since its last call (or its enrolment) at the board's minute")
    silent = serializers.BooleanField(help_text="silent long enough for the agent_silent alert")


class NowBoardSerializer(serializers.Serializer[Any]):
    at = serializers.DateTimeField(help_text="the board's minute (UTC): every rate ends here")
    targets = TargetNowSerializer(many=True)
    sites = SiteNowSerializer(many=True)
    sources = SourceNowSerializer(many=True)
    agents = AgentNowSerializer(many=True, help_text="the live agents of the challenge's sites")
    alerts = AlertSerializer(many=True)
