"""factory_boy factories for the plan: challenges, activities on their clock, targets. Sites and experiments come
from the registry's factories."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import factory

from challenges.choices import ActivityKind, Direction
from challenges.models import Activity, Challenge, Target
from tests.sites.factories import ExperimentFactory, SiteFactory


class ChallengeFactory(factory.django.DjangoModelFactory[Challenge]):
    """A three-week challenge starting 2022-03-07 00:00 UTC."""

    class Meta:
        model = Challenge
        django_get_or_create = ("slug",)

    name = factory.Sequence(lambda n: f"Challenge {n}")
    slug = factory.Sequence(lambda n: f"challenge-{n}")
    start = datetime(2022, 3, 7, tzinfo=UTC)
    end = factory.LazyAttribute(lambda challenge: challenge.start + timedelta(days=21))


class ActivityFactory(factory.django.DjangoModelFactory[Activity]):
    """A transfer activity over the challenge's first week."""

    class Meta:
        model = Activity

    challenge = factory.SubFactory(ChallengeFactory)
    name = factory.Sequence(lambda n: f"Activity {n}")
    experiment = factory.SubFactory(ExperimentFactory)
    mode = "DT"
    kind = ActivityKind.TRANSFER
    start = factory.LazyAttribute(lambda activity: activity.challenge.start)
    end = factory.LazyAttribute(lambda activity: activity.start + timedelta(days=7))


class TargetFactory(factory.django.DjangoModelFactory[Target]):
    """A target into a site that serves the activity's experiment, at 1 GB/s; pass link_from/link_to with
    site=None, direction="" for a link."""

    class Meta:
        model = Target

    activity = factory.SubFactory(ActivityFactory)
    site = factory.LazyAttribute(lambda target: SiteFactory(experiments=[target.activity.experiment]))
    direction = Direction.IN
    rate = 1e9
