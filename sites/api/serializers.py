"""Serializers of the registry API. Units: rates in bytes per second, sizes in bytes."""

from __future__ import annotations

from typing import Any

from django.core.validators import RegexValidator
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied

from common.fields import StrictCharField, many_as_list
from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint
from sites.roles import user_may
from sites.selectors import door_owner_problem, rse_owner_problem
from sites.validators import endpoint_url_problem


class ExperimentSerializer(serializers.ModelSerializer[Experiment]):
    class Meta:
        model = Experiment
        fields = ["id", "name"]

    def validate_name(self, value: str) -> str:
        clash = Experiment.objects.filter(name__iexact=value)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.pk)
        if clash.exists():
            raise serializers.ValidationError(
                f"an experiment named {clash.get().name!r} exists (names ignore case)", code="unique"
            )
        return value


class CapacitySerializer(serializers.ModelSerializer[Capacity]):
    site = serializers.SlugRelatedField(slug_field="name", queryset=Site.objects.all())
    tape_rate = serializers.FloatField(read_only=True, allow_null=True, help_text="drives x per-drive rate, B/s")

    class Meta:
        model = Capacity
        fields = [
            "id",
            "site",
            "network_rate",
            "tape_drives",
            "tape_drive_rate",
            "tape_rate",
            "staging_request_limit",
            "disk_size",
            "tape_size",
        ]

    def validate_site(self, site: Site) -> Site:
        taken = Capacity.objects.filter(site=site).exclude(pk=getattr(self.instance, "pk", None))
        if taken.exists():
            raise serializers.ValidationError(f"{site.name} has a capacity already: change that one", code="unique")
        return site


class SiteCapacitySerializer(CapacitySerializer):
    class Meta(CapacitySerializer.Meta):
        fields = [name for name in CapacitySerializer.Meta.fields if name not in ("id", "site")]


class SiteSerializer(serializers.ModelSerializer[Site]):
    experiments = serializers.SlugRelatedField(
        slug_field="name", many=True, queryset=Experiment.objects.all(), required=False
    )
    capacity = SiteCapacitySerializer(read_only=True, allow_null=True, source="capacity_or_none")
    endpoints = serializers.SlugRelatedField[StorageEndpoint](slug_field="url", many=True, read_only=True)
    network_hosts = serializers.SlugRelatedField[NetworkHost](slug_field="address", many=True, read_only=True)
    # Said as the schema's pattern and checked by it: two ASCII capitals; contacts a list of strings, not null.
    country = StrictCharField(
        validators=[RegexValidator(r"^[A-Z]{2}$", "a two-letter upper-case ISO 3166-1 code, such as IT")],
        help_text="ISO 3166-1 alpha-2 code",
    )
    contacts = serializers.ListField(
        child=StrictCharField(validators=[RegexValidator(r"\S", "a name or an e-mail address, not blank")]),
        required=False,
        help_text="names or e-mail addresses",
    )

    class Meta:
        model = Site
        fields = [
            "id",
            "name",
            "tier",
            "country",
            "experiments",
            "contacts",
            "latitude",
            "longitude",
            "capacity",
            "endpoints",
            "network_hosts",
        ]

    def to_internal_value(self, data: Any) -> Any:
        many_as_list(self, data)
        return super().to_internal_value(data)

    # The import matches sites by name: only coordinators may rename, re-tier or re-scope a site.
    COORDINATOR_FIELDS = ("name", "tier", "experiments")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        request = self.context.get("request")
        if self.instance is not None and request is not None and not user_may(user=request.user, action="manage"):
            refused = {
                field: "only coordinators change this"
                for field in self.COORDINATOR_FIELDS
                if field in attrs and attrs[field] != getattr(self.instance, field, None) and field != "experiments"
            }
            if "experiments" in attrs and set(attrs["experiments"]) != set(self.instance.experiments.all()):
                refused["experiments"] = "only coordinators change this"
            if refused:
                raise serializers.ValidationError(refused)
        return attrs

    def validate_contacts(self, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(item, str) and item.strip() for item in value):
            raise serializers.ValidationError("a list of non-empty strings (names or e-mail addresses)")
        return value


class StorageEndpointSerializer(serializers.ModelSerializer[StorageEndpoint]):
    site = serializers.SlugRelatedField(slug_field="name", queryset=Site.objects.all())
    rse = serializers.ListField(child=serializers.CharField(max_length=128), source="rse_names", required=False)
    tpc_modes = serializers.ListField(
        child=serializers.ChoiceField(choices=["pull", "push", "streamed"]), required=False
    )
    experiments = serializers.SlugRelatedField(
        slug_field="name",
        many=True,
        queryset=Experiment.objects.all(),
        required=False,
        help_text="the experiments it serves, each among its site's; empty: all of its site's",
    )

    class Meta:
        model = StorageEndpoint
        fields = [
            "id",
            "site",
            "url",
            "scheme",
            "host",
            "port",
            "implementation",
            "kind",
            "tpc_modes",
            "rse",
            "experiments",
        ]
        read_only_fields = ["scheme", "host", "port"]

    def to_internal_value(self, data: Any) -> Any:
        many_as_list(self, data)
        return super().to_internal_value(data)

    def validate_url(self, value: str) -> str:
        problem = endpoint_url_problem(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value

    def validate_tpc_modes(self, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise serializers.ValidationError("each mode once")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A storage door (scheme://host:port) and an RSE name belong to one site, and only coordinators assign
        them (records are matched to sites by them): a site admin edits the rest of their endpoints."""
        instance = self.instance
        url = attrs.get("url", instance.url if instance else "")
        names = attrs.get("rse_names", instance.rse_names if instance else [])
        site = attrs.get("site", instance.site if instance else None)
        request = self.context.get("request")
        assigns = instance is None or url != instance.url or names != instance.rse_names or site != instance.site
        if assigns and request is not None and not user_may(user=request.user, action="manage"):
            raise PermissionDenied(
                "Only coordinators assign storage doors (endpoint URLs) and RSE names to sites: records are counted "
                "for the site that owns them. You may change the other fields of your site's endpoints."
            )
        problems: dict[str, str] = {}
        site_id = site.pk if site else None
        exclude = instance.pk if instance else None
        if url and (problem := door_owner_problem(url=url, site_id=site_id, exclude_pk=exclude)):
            problems["url"] = problem
        if problem := rse_owner_problem(names=list(names), site_id=site_id, exclude_pk=exclude):
            problems["rse"] = problem
        if problem := self._experiments_problem(attrs, site):
            problems["experiments"] = problem
        if problems:
            raise serializers.ValidationError(problems)
        return attrs

    def _experiments_problem(self, attrs: dict[str, Any], site: Site | None) -> str | None:
        """An endpoint serves some of its site's experiments (the current ones when only the site changes)."""
        if "experiments" in attrs:
            experiments = list(attrs["experiments"])
        elif self.instance is not None and site != self.instance.site:
            experiments = list(self.instance.experiments.all())
        else:
            return None
        served = set(site.experiments.values_list("pk", flat=True)) if site is not None else set()
        foreign = sorted(experiment.name for experiment in experiments if experiment.pk not in served)
        if foreign:
            return f"{', '.join(foreign)} not among the experiments of site {site}: add them to the site first"
        return None

    def create(self, validated_data: dict[str, Any]) -> StorageEndpoint:
        experiments = validated_data.pop("experiments", None)
        endpoint = StorageEndpoint(**{key: value for key, value in validated_data.items() if key != "url"})
        endpoint.set_url(validated_data["url"])
        endpoint.save()
        if experiments:
            endpoint.experiments.set(experiments)
        return endpoint

    def update(self, instance: StorageEndpoint, validated_data: dict[str, Any]) -> StorageEndpoint:
        experiments = validated_data.pop("experiments", None)
        if "url" in validated_data:
            instance.set_url(validated_data.pop("url"))
        for key, value in validated_data.items():
            setattr(instance, key, value)
        instance.save()
        if experiments is not None:
            instance.experiments.set(experiments)
        return instance


class NetworkHostSerializer(serializers.ModelSerializer[NetworkHost]):
    site = serializers.SlugRelatedField(slug_field="name", queryset=Site.objects.all())

    class Meta:
        model = NetworkHost
        fields = ["id", "site", "address"]
