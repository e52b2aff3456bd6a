"""Serializers of the sweeps API: sizes in bytes, rates in bytes per second (iperf3_bps in bits per second, as
iperf3 states it), durations in seconds, times ISO 8601 UTC."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from challenges.models import Activity
from runs.parameters import CHECKSUMS

from .. import plan
from ..choices import MODES, PROTOCOLS
from ..models import Sweep, SweepStep
from ..tables import step_measured_by, steps_of, sweep_progress


class LinkSerializer(serializers.Serializer[Any]):
    source = serializers.CharField(max_length=64)
    destination = serializers.CharField(max_length=64)


class SweepStartSerializer(serializers.Serializer[Any]):
    """What POST /sweeps/ takes. Give `sites` (every ordered pair is a link) or `links`."""

    name = serializers.CharField(max_length=200)
    activity = serializers.PrimaryKeyRelatedField(
        queryset=Activity.objects.select_related("challenge", "experiment"),
        required=False,
        allow_null=True,
        help_text="id of the transfer activity its runs count for; omit for an ad hoc sweep",
    )
    sites = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, max_length=plan.MAX_SITES, help_text="site names"
    )
    links = serializers.ListField(child=LinkSerializer(), required=False, max_length=plan.MAX_STEPS)
    modes = serializers.ListField(child=serializers.ChoiceField(choices=MODES), min_length=1, max_length=3)
    concurrency = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=plan.MAX_CONCURRENCY),
        min_length=1,
        max_length=plan.MAX_CONCURRENCIES,
        help_text="files in flight, one step per value, e.g. [10, 40, 100]",
    )
    file_size = serializers.IntegerField(
        min_value=1, max_value=plan.MAX_FILE_SIZE, default=plan.DEFAULT_FILE_SIZE, help_text="bytes"
    )
    file_count = serializers.IntegerField(
        min_value=1,
        max_value=plan.MAX_FILE_COUNT,
        required=False,
        allow_null=True,
        help_text="files per step; default: the step's concurrency",
    )
    protocol = serializers.ChoiceField(choices=PROTOCOLS, default="davs")
    network = serializers.BooleanField(default=True, help_text="iperf3 and path MTU per link, from its source")
    network_duration = serializers.IntegerField(
        min_value=1, max_value=plan.MAX_NETWORK_DURATION, default=plan.DEFAULT_NETWORK_DURATION, help_text="seconds"
    )
    checksum = serializers.ChoiceField(
        choices=CHECKSUMS,
        default="ADLER32",
        help_text="checked at both ends of every copy; none for storage that computes none (plain WebDAV)",
    )
    experiment = serializers.CharField(
        max_length=64, required=False, help_text="the experiment its records belong to (default: the activity's)"
    )


class SweepStepSerializer(serializers.ModelSerializer[SweepStep]):
    source = serializers.SlugRelatedField[Any](slug_field="name", read_only=True)
    destination = serializers.SlugRelatedField[Any](slug_field="name", read_only=True)
    measured_from = serializers.SerializerMethodField(
        help_text="the source site whose worker ran it, or 'portal' (the default queue); null before it starts"
    )
    measured_by = serializers.SerializerMethodField(
        help_text=(
            "where it was measured: 'measured at SITE by its agent', 'measured at SITE by the portal's worker "
            "there' or 'measured by the portal's workers'; null before it starts"
        )
    )
    run_state = serializers.SerializerMethodField()

    class Meta:
        model = SweepStep
        fields = [
            "index",
            "kind",
            "source",
            "destination",
            "mode",
            "concurrency",
            "state",
            "run",
            "run_state",
            "queue",
            "measured_from",
            "measured_by",
            "message",
            "started_at",
            "finished_at",
        ]

    def get_measured_from(self, step: SweepStep) -> str | None:
        return step.measured_from if step.queue else None

    def get_measured_by(self, step: SweepStep) -> str | None:
        return step_measured_by(step)

    def get_run_state(self, step: SweepStep) -> str | None:
        return step.run.state if step.run is not None else None


class SweepProgressSerializer(serializers.Serializer[Any]):
    steps_total = serializers.IntegerField()
    steps_ended = serializers.IntegerField()
    current_step = serializers.IntegerField(allow_null=True)
    current = serializers.CharField(allow_null=True)
    eta_seconds = serializers.FloatField(allow_null=True, help_text="null when unknown or ended")


class SweepSerializer(serializers.ModelSerializer[Sweep]):
    created_by = serializers.SlugRelatedField[Any](slug_field="username", read_only=True, allow_null=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Sweep
        fields = [
            "id",
            "name",
            "activity",
            "state",
            "message",
            "parameters",
            "progress",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]

    @extend_schema_field(SweepProgressSerializer)
    def get_progress(self, sweep: Sweep) -> dict[str, Any]:
        return sweep_progress(sweep).as_dict()

    def to_representation(self, sweep: Sweep) -> dict[str, Any]:
        data = super().to_representation(sweep)
        data["parameters"] = {k: v for k, v in (data["parameters"] or {}).items() if k != "steps"}
        return data


class SweepDetailSerializer(SweepSerializer):
    steps = serializers.SerializerMethodField()

    class Meta(SweepSerializer.Meta):
        fields = [*SweepSerializer.Meta.fields, "steps"]

    @extend_schema_field(SweepStepSerializer(many=True))
    def get_steps(self, sweep: Sweep) -> list[dict[str, Any]]:
        return list(SweepStepSerializer(steps_of(sweep), many=True).data)


class MatrixRowSerializer(serializers.Serializer[Any]):
    step = serializers.IntegerField()
    run = serializers.IntegerField(allow_null=True)
    state = serializers.CharField()
    source = serializers.CharField()
    destination = serializers.CharField()
    mode = serializers.CharField()
    concurrency = serializers.IntegerField()
    files_ok = serializers.IntegerField(allow_null=True)
    files_failed = serializers.IntegerField(allow_null=True)
    failure_ratio = serializers.FloatField(allow_null=True)
    aggregate_rate = serializers.FloatField(allow_null=True, help_text="bytes over the step's active window, B/s")
    sum_of_file_rates = serializers.FloatField(
        allow_null=True,
        help_text=(
            "each ok file's bytes over its own duration, added up (the seed's way) over the step's C files in "
            "flight: scaled to C when the step copied more files than C (mean file rate x C), B/s"
        ),
    )
    volume = serializers.IntegerField(allow_null=True)
    active_seconds = serializers.FloatField(allow_null=True)
    top_error = serializers.CharField(allow_blank=True)
    measured_from = serializers.CharField(allow_null=True)
    measured_by = serializers.CharField(
        allow_null=True,
        help_text=(
            "where it was measured: 'measured at SITE by its agent', 'measured at SITE by the portal's worker "
            "there' or 'measured by the portal's workers'; null before it starts"
        ),
    )


class NetworkRowSerializer(serializers.Serializer[Any]):
    step = serializers.IntegerField()
    run = serializers.IntegerField(allow_null=True)
    state = serializers.CharField()
    source = serializers.CharField()
    destination = serializers.CharField()
    iperf3_bps = serializers.FloatField(allow_null=True, help_text="bits per second, as iperf3 states it")
    iperf3_rate = serializers.FloatField(allow_null=True, help_text="the same in bytes per second")
    retransmits = serializers.IntegerField(allow_null=True)
    path_mtu = serializers.IntegerField(allow_null=True, help_text="tracepath's path MTU from the source, bytes")
    local_mtu = serializers.IntegerField(allow_null=True, help_text="the MTU of the source's interface to the host")
    far_mtu = serializers.IntegerField(
        allow_null=True,
        help_text="the destination's interface MTU, as the step the other way found it (null: not measured)",
    )
    reached = serializers.BooleanField(
        allow_null=True, help_text="tracepath at the source's MTU reached the destination (false: large packets lost)"
    )
    mtu_mismatch = serializers.BooleanField(allow_null=True)
    smaller_mtu_at = serializers.CharField(
        allow_null=True, help_text="the end (site) with the smaller MTU when the ends' MTUs differ, else null"
    )
    hops = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    measured_from = serializers.CharField(allow_null=True)
    measured_by = serializers.CharField(
        allow_null=True,
        help_text=(
            "where it was measured: 'measured at SITE by its agent', 'measured at SITE by the portal's worker "
            "there' or 'measured by the portal's workers'; null before it starts"
        ),
    )


class SweepMatrixSerializer(serializers.Serializer[Any]):
    sweep = serializers.IntegerField()
    state = serializers.CharField()
    rows = MatrixRowSerializer(many=True)
    network = NetworkRowSerializer(many=True)
