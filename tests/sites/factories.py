"""factory_boy factories for the registry. Endpoints are built through `set_url` so that scheme, host and port
match the URL, as everywhere else."""

from __future__ import annotations

from typing import Any

import factory
from django.contrib.auth import get_user_model

from sites.models import Capacity, Experiment, NetworkHost, Site, StorageEndpoint


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.org")


class ExperimentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Experiment
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"EXP{n}")


class SiteFactory(factory.django.DjangoModelFactory):
    """A site; `SiteFactory(experiments=[atlas])` sets its experiments."""

    class Meta:
        model = Site
        django_get_or_create = ("name",)
        skip_postgeneration_save = True

    name = factory.Sequence(lambda n: f"SITE-{n}")
    tier = 2
    country = "IT"

    @factory.post_generation
    def experiments(self, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create and extracted:
            self.experiments.set(extracted)


class StorageEndpointFactory(factory.django.DjangoModelFactory):
    """A storage endpoint; pass `url=` to choose its URL (scheme, host and port follow)."""

    class Meta:
        model = StorageEndpoint
        skip_postgeneration_save = True

    site = factory.SubFactory(SiteFactory)
    url = factory.Sequence(lambda n: f"root://se{n}.example.org:1094//data")
    implementation = "XRootD"
    kind = "disk"
    tpc_modes = factory.LazyFunction(lambda: ["pull"])
    rse_names = factory.LazyFunction(list)

    @factory.post_generation
    def experiments(self, create: bool, extracted: Any, **kwargs: Any) -> None:
        if create and extracted:
            self.experiments.set(extracted)

    @classmethod
    def _build(cls, model_class: type[StorageEndpoint], *args: Any, **kwargs: Any) -> StorageEndpoint:
        url = kwargs.pop("url")
        endpoint = model_class(*args, **kwargs)
        endpoint.set_url(url)
        return endpoint

    @classmethod
    def _create(cls, model_class: type[StorageEndpoint], *args: Any, **kwargs: Any) -> StorageEndpoint:
        endpoint = cls._build(model_class, *args, **kwargs)
        endpoint.save()
        return endpoint


class NetworkHostFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = NetworkHost

    site = factory.SubFactory(SiteFactory)
    address = factory.Sequence(lambda n: f"ps{n}.example.org")


class CapacityFactory(factory.django.DjangoModelFactory):
    """A capacity with every field known: 10 Gb/s network, 4 drives of 300 MB/s, 1 PB disk, 10 PB tape."""

    class Meta:
        model = Capacity
        django_get_or_create = ("site",)

    site = factory.SubFactory(SiteFactory)
    network_rate = 1.25e9
    tape_drives = 4
    tape_drive_rate = 300e6
    staging_request_limit = 10_000
    disk_size = 10**15
    tape_size = 10**16
