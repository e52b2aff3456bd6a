"""What a site's agent sends and receives: claims, heartbeats, results. Units as everywhere: bytes, seconds, ISO
8601 UTC."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from challenges.choices import ActivityKind
from common.fields import StrictCharField, StrictFloatField, StrictIntegerField

from ..services import MAX_WAIT


class ClaimSerializer(serializers.Serializer[Any]):
    most = StrictIntegerField(min_value=1, max_value=64, default=1, help_text="jobs it takes at most")
    wait = StrictFloatField(
        min_value=0, max_value=MAX_WAIT, default=MAX_WAIT, help_text="seconds to wait for a job when none waits"
    )


class JobSerializer(serializers.Serializer[Any]):
    """One job as the agent runs it: `kind` says which other fields it has (runs/agents/payloads.py)."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=["prepare", "transfer", "probe", "copies-delete"])
    attempt = serializers.IntegerField(help_text="send it back with the result")
    run = serializers.IntegerField()
    probe = serializers.ChoiceField(choices=ActivityKind.choices, help_text="the run's kind")


class ClaimedSerializer(serializers.Serializer[Any]):
    jobs = JobSerializer(many=True)


class InFlightSerializer(serializers.Serializer[Any]):
    id = StrictIntegerField(min_value=1, max_value=2**62, help_text="a job it runs")
    bytes = StrictIntegerField(min_value=0, max_value=2**62, default=0, help_text="bytes copied so far")


class HeartbeatSerializer(serializers.Serializer[Any]):
    version = StrictCharField(max_length=32)
    kinds = serializers.ListField(child=serializers.ChoiceField(choices=ActivityKind.choices), max_length=16)
    in_flight = InFlightSerializer(many=True, max_length=1000)  # type: ignore[call-arg]  # DRF takes it, its stubs not


class StopSerializer(serializers.Serializer[Any]):
    stop = serializers.ListField(child=serializers.IntegerField(), help_text="jobs to stop: their run ended")


class ResultSerializer(serializers.Serializer[Any]):
    """A job's result. transfer: `outcome`; prepare: `error` (empty: ready) and `stage`; probe: `outcomes`,
    `summary`, `error`; copies-delete: `deleted`, `errors`. Any may carry `credential` (what it presented to
    storage: never a token)."""

    attempt = StrictIntegerField(min_value=0, max_value=32767)
    outcome = serializers.DictField(required=False, help_text="measure.outcomes.FileOutcome.to_dict()")
    outcomes = serializers.ListField(child=serializers.DictField(), required=False, max_length=100000)
    summary = serializers.DictField(required=False)
    error = StrictCharField(required=False, allow_blank=True, max_length=10000)
    stage = serializers.ChoiceField(choices=["credential", "test_file"], required=False)
    deleted = StrictIntegerField(min_value=0, max_value=2**62, required=False)
    # DRF's metaclass takes declared fields off the class, so this one leaves Serializer.errors alone.
    errors = serializers.ListField(  # type: ignore[assignment]
        child=StrictCharField(max_length=10000), required=False, max_length=100000
    )
    credential = serializers.DictField(required=False)


class StoredSerializer(serializers.Serializer[Any]):
    stored = serializers.BooleanField(help_text="false: this result had been stored already (a second delivery)")
