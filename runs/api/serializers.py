"""Serializers of the runs API. Sizes in bytes, rates in bytes per second, durations in seconds, times ISO 8601
UTC. A run's live figures come from runs.selectors.run_progress; starting one goes through run_start."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from challenges.choices import ActivityKind
from challenges.models import Activity
from results.active_rates import active_rates
from results.models import TransferRecord

from ..models import Run, RunFile
from ..selectors import run_progress


class RunProgressSerializer(serializers.Serializer[Any]):
    """runs.selectors.RunProgress as JSON."""

    state = serializers.CharField()
    message = serializers.CharField(allow_blank=True)
    files_total = serializers.IntegerField()
    files_done = serializers.IntegerField()
    files_failed = serializers.IntegerField()
    files_cancelled = serializers.IntegerField()
    in_flight = serializers.IntegerField()
    queued = serializers.IntegerField()
    bytes_done = serializers.IntegerField(help_text="bytes of the files done")
    bytes_in_flight = serializers.IntegerField(
        help_text="bytes the copies in flight have copied so far (reported by the workers every few seconds)"
    )
    rate = serializers.FloatField(
        allow_null=True, help_text="aggregate rate over the last 60 s, B/s; null before it starts"
    )
    eta_seconds = serializers.FloatField(allow_null=True, help_text="seconds left; null when unknown")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class AgentSerializer(serializers.Serializer[Any]):
    """Which site's agent ran a run."""

    site = serializers.CharField(source="site.name")
    name = serializers.CharField()


class RunSerializer(serializers.ModelSerializer[Run]):
    """A run as the list shows it: what was asked, by whom, and where it stands."""

    challenge = serializers.SerializerMethodField(help_text="slug of the activity's challenge; null for ad hoc")
    experiment = serializers.SerializerMethodField(help_text="experiment of the activity; null for ad hoc")
    activity_name = serializers.SerializerMethodField()
    created_by = serializers.SlugRelatedField[Any](slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = Run
        fields = [
            "id",
            "activity",
            "activity_name",
            "challenge",
            "experiment",
            "kind",
            "state",
            "parameters",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "deadline",
            "message",
            "copies",
            "copies_message",
            "directory",
            "credential",
            "credential_scopes",
            "agent",
        ]
        read_only_fields = fields

    agent = AgentSerializer(
        read_only=True, allow_null=True, help_text="the site's agent that ran it; null: the portal's workers"
    )
    credential_scopes = serializers.SerializerMethodField(
        help_text="for a run with tokens: the audience and scopes asked per storage (never the token)"
    )

    @extend_schema_field(
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "audience": {"type": "string"},
                    "scopes": {"type": "array", "items": {"type": "string"}},
                },
            },
        }
    )
    def get_credential_scopes(self, run: Run) -> list[dict[str, Any]]:
        return list((run.credential_detail or {}).get("requests", []))

    def get_challenge(self, run: Run) -> str | None:
        return run.activity.challenge.slug if run.activity else None

    def get_experiment(self, run: Run) -> str | None:
        return run.activity.experiment.name if run.activity else None

    def get_activity_name(self, run: Run) -> str | None:
        return run.activity.name if run.activity else None


class ActiveRatesSerializer(serializers.Serializer[Any]):
    """A run's rates over its active window (results.active_rates): bytes, seconds, bytes per second; null when
    it moved nothing (or, for the stable rate, was active under a minute)."""

    start = serializers.DateTimeField(allow_null=True, help_text="first start of its successful transfers")
    end = serializers.DateTimeField(allow_null=True, help_text="last end of its successful transfers")
    active_seconds = serializers.FloatField()
    volume = serializers.IntegerField(help_text="bytes")
    files_ok = serializers.IntegerField()
    files_failed = serializers.IntegerField()
    average_rate = serializers.FloatField(allow_null=True, help_text="volume / active_seconds")
    max_rate = serializers.FloatField(allow_null=True)
    max_window = serializers.FloatField(allow_null=True, help_text="seconds: a tenth of the active time, <= 3600")
    max_window_start = serializers.DateTimeField(allow_null=True)
    stable_rate = serializers.FloatField(allow_null=True)
    stable_window = serializers.FloatField(allow_null=True, help_text="seconds: half the active time, <= 18000")
    stable_window_start = serializers.DateTimeField(allow_null=True)
    resolution = serializers.FloatField(allow_null=True, help_text="seconds a bin of the series")


class LinkCellSerializer(serializers.Serializer[Any]):
    """One cell of a runs' matrix (results.matrix.cells): bytes, seconds, bytes per second."""

    source = serializers.CharField()
    destination = serializers.CharField()
    mode = serializers.CharField(allow_null=True)
    concurrency = serializers.IntegerField(allow_null=True)
    rate = serializers.FloatField(allow_null=True, help_text="volume over the link's active time")
    sum_of_file_rates = serializers.FloatField(help_text="each ok file's bytes over its own duration, added up")
    volume = serializers.IntegerField()
    active_seconds = serializers.FloatField(help_text="length of the union of its transfers' intervals")
    files_ok = serializers.IntegerField()
    files_failed = serializers.IntegerField()
    failure_ratio = serializers.FloatField(allow_null=True)
    runs = serializers.ListField(child=serializers.IntegerField())
    top_error = serializers.CharField()
    measured_by = serializers.CharField(
        allow_null=True,
        help_text='where its runs were measured: "measured at SITE by its agent", "measured by the portal\'s workers"',
    )


class LinkMatrixSerializer(serializers.Serializer[Any]):
    runs = serializers.ListField(child=serializers.IntegerField(), help_text="the runs read (those you may read)")
    split = serializers.ListField(child=serializers.CharField())
    rows = LinkCellSerializer(many=True)


class RunDetailSerializer(RunSerializer):
    """One run with its live progress, its rates over its active window, and what a staging, network, cache or io
    probe reported as a whole."""

    progress = serializers.SerializerMethodField()
    rates = serializers.SerializerMethodField()

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "summary", "progress", "rates"]
        read_only_fields = fields

    @extend_schema_field(RunProgressSerializer)
    def get_progress(self, run: Run) -> dict[str, Any]:
        progress: dict[str, Any] = RunProgressSerializer(run_progress(run).to_dict()).data
        return progress

    @extend_schema_field(ActiveRatesSerializer)
    def get_rates(self, run: Run) -> dict[str, Any]:
        rates: dict[str, Any] = active_rates(TransferRecord.objects.filter(run=run)).to_dict()
        return rates


class RunStartSerializer(serializers.Serializer[Any]):
    """What POST /runs/ takes: an activity (its parameters are the defaults) or a kind for an ad hoc run, and
    parameters that override the activity's (file_count, file_size, concurrency, copy_mode, ...)."""

    activity = serializers.PrimaryKeyRelatedField(
        queryset=Activity.objects.select_related("challenge", "experiment"),
        required=False,
        allow_null=True,
        help_text="id of the activity to run; omit for an ad hoc run",
    )
    kind = serializers.ChoiceField(
        choices=ActivityKind.choices, required=False, help_text="the probe of an ad hoc run; defaults to the activity's"
    )
    parameters = serializers.DictField(
        required=False, default=dict, help_text="overrides, e.g. file_count, file_size (bytes), concurrency, copy_mode"
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("activity") is None and not attrs.get("kind"):
            raise serializers.ValidationError({"activity": ["give an activity, or a kind for an ad hoc run"]})
        return attrs


class RunFileSerializer(serializers.ModelSerializer[RunFile]):
    """One file of a run: where it went, how it ended, gfal2's message when it failed."""

    class Meta:
        model = RunFile
        fields = [
            "index",
            "source_url",
            "destination_url",
            "size",
            "state",
            "attempt",
            "queue",
            "worker",
            "start",
            "end",
            "bytes",
            "mode",
            "error",
        ]
        read_only_fields = fields
