"""factory_boy factories for site reports. The challenge and site come from the plan's and registry's factories."""

from __future__ import annotations

from datetime import timedelta

import factory

from reports.models import Outage, SiteReport
from tests.challenges.factories import ChallengeFactory
from tests.sites.factories import SiteFactory


class SiteReportFactory(factory.django.DjangoModelFactory[SiteReport]):
    """A draft report of a new site on a new challenge."""

    class Meta:
        model = SiteReport

    challenge = factory.SubFactory(ChallengeFactory)
    site = factory.SubFactory(SiteFactory)
    notes = ""


class OutageFactory(factory.django.DjangoModelFactory[Outage]):
    """Two hours out, a day into the challenge."""

    class Meta:
        model = Outage

    report = factory.SubFactory(SiteReportFactory)
    start = factory.LazyAttribute(lambda outage: outage.report.challenge.start + timedelta(days=1))
    end = factory.LazyAttribute(lambda outage: outage.start + timedelta(hours=2))
    reason = "dCache pool nodes rebooted"
