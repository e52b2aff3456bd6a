"""Serializers of the alert subscriptions and deliveries API. Challenges by slug, experiments and sites by name,
times ISO 8601 UTC."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from challenges.selectors import challenges_visible

from ..choices import AlertKind
from ..models import AlertDelivery, AlertSubscription
from ..subscriptions import experiments_named, sites_named

MAX_NAMES = 200  # experiments or sites in one subscription: more than the registry holds


class _ChallengeSlugField(serializers.CharField):
    """A challenge by its slug; null for every challenge."""

    def to_representation(self, value: Any) -> str:
        return str(value.slug)


class _NamesField(serializers.ListField):
    """Related rows (experiments, sites) by their names."""

    def to_representation(self, data: Any) -> list[str]:
        return [str(row.name) for row in data.all()]


def _unknown(what: str, names: list[str]) -> serializers.ValidationError:
    listed = ", ".join(repr(name) for name in names[:20])
    return serializers.ValidationError(f"no {what} named {listed}")


class TokenScopeSerializer(serializers.Serializer[Any]):
    """The scope of the token a subscription was made with: it hears only what that role reads."""

    role = serializers.CharField()
    site = serializers.CharField(allow_null=True, help_text="a site admin's site")
    experiment = serializers.CharField(allow_null=True, help_text="a DDM service's experiment")


class AlertSubscriptionSerializer(serializers.ModelSerializer[AlertSubscription]):
    challenge = _ChallengeSlugField(
        required=False, allow_null=True, max_length=100, help_text="the challenge's slug; null for every challenge"
    )
    experiments = _NamesField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=MAX_NAMES,
        help_text="experiment names; empty for every experiment you may read",
    )
    sites = _NamesField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=MAX_NAMES,
        help_text="site names (an alert's site or either end of its link); empty for every site",
    )
    kinds = serializers.ListField(
        child=serializers.ChoiceField(
            choices=AlertKind.choices,
            error_messages={"invalid_choice": f'no alert kind "{{input}}" (kinds: {", ".join(AlertKind.values)})'},
        ),
        required=False,
        max_length=len(AlertKind.values),
        help_text="alert kinds; empty for every kind",
    )
    created_by = serializers.CharField(source="created_by.username", read_only=True, allow_null=True)
    scope = serializers.SerializerMethodField(
        help_text="made with a token of one role: that role, kept as long as the subscription lives (it hears only "
        "what the role reads); null: made with all its creator's roles"
    )

    class Meta:
        model = AlertSubscription
        fields = [
            "id",
            "name",
            "url",
            "email",
            "format",
            "challenge",
            "experiments",
            "sites",
            "kinds",
            "active",
            "created_by",
            "created_at",
            "scope",
        ]
        read_only_fields = ["created_at"]
        extra_kwargs = {
            "url": {"help_text": "a webhook (http or https, a public host); empty when e-mailed"},
            "email": {"help_text": "an e-mail address; empty when posted to a webhook"},
            "format": {"help_text": "the webhook's body: the alert as JSON, or Slack/Mattermost's {\"text\": ...}"},
        }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                known = ", ".join(name for name, field in self.fields.items() if not field.read_only)
                raise serializers.ValidationError(
                    {"non_field_errors": [f"unknown field {name[:100]!r} (known: {known})" for name in unknown[:20]]}
                )
        return super().to_internal_value(data)

    @extend_schema_field(TokenScopeSerializer(allow_null=True))
    def get_scope(self, subscription: AlertSubscription) -> dict[str, Any] | None:
        if not subscription.scope_role:
            return None
        site, experiment = subscription.scope_site, subscription.scope_experiment
        return {
            "role": subscription.scope_role,
            "site": site.name if site else None,
            "experiment": experiment.name if experiment else None,
        }

    def validate_challenge(self, slug: str | None) -> Any:
        if slug is None:
            return None
        request = self.context.get("request")
        challenge = challenges_visible(user=getattr(request, "user", None)).filter(slug=slug).first()
        if challenge is None:
            raise serializers.ValidationError(f"no challenge {slug!r}")
        return challenge

    def validate_experiments(self, names: list[str]) -> list[Any]:
        experiments, unknown = experiments_named(names)
        if unknown:
            raise _unknown("experiment", unknown)
        return experiments

    def validate_sites(self, names: list[str]) -> list[Any]:
        sites, unknown = sites_named(names)
        if unknown:
            raise _unknown("site", unknown)
        return sites

    def validate_kinds(self, kinds: list[str]) -> list[str]:
        return list(dict.fromkeys(kinds))


class AlertDeliverySerializer(serializers.ModelSerializer[AlertDelivery]):
    subscription_name = serializers.CharField(source="subscription.name", read_only=True)

    class Meta:
        model = AlertDelivery
        fields = [
            "id",
            "alert",
            "subscription",
            "subscription_name",
            "alert_state",
            "status",
            "attempts",
            "response_code",
            "error",
            "created_at",
            "sent_at",
        ]
        read_only_fields = fields
