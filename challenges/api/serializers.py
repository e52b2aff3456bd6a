"""Serializers of the planning API. Rates in bytes per second, times ISO 8601 UTC."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from challenges import services
from challenges.models import ACTIVITY_PLAN_FIELDS, Activity, Challenge, Target
from sites.models import Experiment, Site


def _checked(instance: Any, check: Any, **kwargs: Any) -> None:
    try:
        check(**kwargs)
    except DjangoValidationError as exc:
        raise serializers.ValidationError(exc.message_dict) from exc


class TargetSerializer(serializers.ModelSerializer[Target]):
    activity = serializers.PrimaryKeyRelatedField(queryset=Activity.objects.all())
    site = serializers.SlugRelatedField(slug_field="name", queryset=Site.objects.all(), required=False, allow_null=True)
    link_from = serializers.SlugRelatedField(
        slug_field="name", queryset=Site.objects.all(), required=False, allow_null=True
    )
    link_to = serializers.SlugRelatedField(
        slug_field="name", queryset=Site.objects.all(), required=False, allow_null=True
    )
    derived_rate = serializers.FloatField(
        read_only=True, allow_null=True, help_text="nominal_rate x the product of the factors, B/s"
    )

    class Meta:
        model = Target
        fields = [
            "id",
            "activity",
            "site",
            "direction",
            "link_from",
            "link_to",
            "rate",
            "nominal_rate",
            "factors",
            "derived_rate",
        ]
        validators: list[Any] = []  # the planning rules below report duplicates with a clear message

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        target = Target(**{**self._current(), **attrs})
        _checked(target, services.target_check, target=target)
        return attrs

    def _current(self) -> dict[str, Any]:
        if self.instance is None:
            return {}
        return {
            field: getattr(self.instance, field)
            for field in ("activity", "site", "direction", "link_from", "link_to", "rate", "nominal_rate", "factors")
        } | {"pk": self.instance.pk}


class ActivitySerializer(serializers.ModelSerializer[Activity]):
    challenge = serializers.SlugRelatedField(slug_field="slug", queryset=Challenge.objects.all())
    experiment = serializers.SlugRelatedField(slug_field="name", queryset=Experiment.objects.all())
    source = serializers.SlugRelatedField(  # type: ignore[assignment]  # shadows Field.source
        slug_field="name", queryset=Site.objects.all(), required=False, allow_null=True
    )
    targets = TargetSerializer(many=True, read_only=True)
    injection = serializers.JSONField(
        read_only=True, help_text="Rucio load injection settings it overrides; set through the plan document"
    )

    class Meta:
        model = Activity
        fields = [
            "id",
            "challenge",
            "name",
            *ACTIVITY_PLAN_FIELDS,
            "injection",
            "targets",
        ]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = (
            {}
            if self.instance is None
            else {
                field: getattr(self.instance, field)
                for field in ("challenge", "experiment", "start", "end", "source", "ddm_activities")
            }
        )
        activity = Activity(**{**current, **{key: value for key, value in attrs.items()}})
        _checked(activity, services.activity_check, activity=activity)
        return attrs


class ChallengeSerializer(serializers.ModelSerializer[Challenge]):
    compare_with = serializers.SlugRelatedField(
        slug_field="slug", queryset=Challenge.objects.all(), required=False, allow_null=True
    )

    class Meta:
        model = Challenge
        fields = ["id", "name", "slug", "start", "end", "description", "compare_with", "max_window", "stable_window"]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        current = (
            {}
            if self.instance is None
            else {field: getattr(self.instance, field) for field in ("start", "end", "max_window", "stable_window")}
        )
        challenge = Challenge(**{**current, **attrs})
        _checked(challenge, services.challenge_check, challenge=challenge)
        return attrs


class InjectionPlanSerializer(serializers.Serializer[Any]):
    """One Rucio load injection plan (challenges.injection.InjectionPlan)."""

    activity = serializers.CharField()
    experiment = serializers.CharField()
    source = serializers.CharField(help_text="the source site")  # type: ignore[assignment]  # shadows Field.source
    destination = serializers.CharField(help_text="the destination site")
    src_rse = serializers.CharField()
    dest_rse = serializers.CharField()
    inject_rate = serializers.IntegerField(help_text="Mbps as Rucio's submitter reads it: bytes/s x 8 / 10^6")
    inject_rate_bytes = serializers.FloatField(help_text="bytes per second")
    start_time = serializers.DateTimeField()
    end_time = serializers.DateTimeField()
    interval = serializers.IntegerField(help_text="seconds")
    fudge = serializers.FloatField()
    max_injection = serializers.FloatField()
    expiration_delay = serializers.IntegerField(help_text="seconds")
    rule_lifetime = serializers.IntegerField(help_text="seconds")
    big_first = serializers.BooleanField()
    dry_run = serializers.BooleanField()
    comments = serializers.CharField()


class InjectionProblemSerializer(serializers.Serializer[Any]):
    """A link of the plan that gives no injection plan, and what to do about it."""

    activity = serializers.CharField()
    experiment = serializers.CharField()
    place = serializers.CharField(help_text='"SOURCE -> DESTINATION"')
    problem = serializers.CharField()


class InjectionPlansSerializer(serializers.Serializer[Any]):
    unit = serializers.CharField(help_text="the unit of inject_rate: Mbps")
    unit_note = serializers.CharField()
    plans = InjectionPlanSerializer(many=True)
    problems = InjectionProblemSerializer(many=True)
