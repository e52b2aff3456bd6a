"""The registry: who and where. Experiments (VOs), sites, their storage endpoints, network hosts and capacity,
and the roles and API tokens of the people and services that use the portal."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Lower

from .choices import EndpointKind, Implementation, Role, TpcMode


class Experiment(models.Model):
    """A virtual organisation (ATLAS, CMS, ...). Its name matches the `vo` of FTS and Rucio messages,
    case-insensitively."""

    name = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(Lower("name"), name="experiment_name_ci_unique")]

    def __str__(self) -> str:
        return self.name


class Site(models.Model):
    """A computing site: its tier, country, the experiments it serves and whom to contact."""

    name = models.CharField(max_length=64, unique=True)
    tier = models.PositiveSmallIntegerField(validators=[MaxValueValidator(3)])
    country = models.CharField(max_length=2, help_text="ISO 3166-1 alpha-2 code")
    experiments = models.ManyToManyField(Experiment, related_name="sites", blank=True)
    contacts = models.JSONField(default=list, blank=True, help_text="names or e-mail addresses")
    latitude = models.FloatField(null=True, blank=True, validators=[MinValueValidator(-90), MaxValueValidator(90)])
    longitude = models.FloatField(null=True, blank=True, validators=[MinValueValidator(-180), MaxValueValidator(180)])

    class Meta:
        ordering = ["tier", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def capacity_or_none(self) -> Capacity | None:
        """The site's capacity row, or None when none was recorded."""
        try:
            return self.capacity
        except Capacity.DoesNotExist:
            return None


class StorageEndpoint(models.Model):
    """A storage service of a site, by its base URL. Its host (and port) is how incoming transfer records are
    matched to the site."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="endpoints")
    url = models.CharField(max_length=512, unique=True)
    scheme = models.CharField(max_length=16, editable=False)
    host = models.CharField(max_length=255, editable=False, db_index=True)
    port = models.PositiveIntegerField(null=True, blank=True, editable=False)
    implementation = models.CharField(max_length=16, choices=Implementation.choices, default=Implementation.OTHER)
    kind = models.CharField(max_length=8, choices=EndpointKind.choices, default=EndpointKind.DISK)
    tpc_modes = ArrayField(models.CharField(max_length=8, choices=TpcMode.choices), default=list, blank=True)
    rse_names = ArrayField(models.CharField(max_length=128), default=list, blank=True)
    experiments = models.ManyToManyField(
        Experiment,
        related_name="storage_endpoints",
        blank=True,
        help_text="the experiments this endpoint serves (its RSEs are theirs); empty: all of its site's",
    )

    class Meta:
        ordering = ["site__name", "url"]

    def __str__(self) -> str:
        return self.url

    def set_url(self, url: str) -> None:
        """Set the URL and the scheme, host and port derived from it."""
        parts = urlsplit(url)
        self.url = url
        self.scheme = parts.scheme
        self.host = (parts.hostname or "").lower()
        self.port = parts.port


class NetworkHost(models.Model):
    """An iperf3 / perfSONAR host of a site, as host or host:port."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="network_hosts")
    address = models.CharField(max_length=255, unique=True)

    class Meta:
        ordering = ["site__name", "address"]

    def __str__(self) -> str:
        return self.address


class Capacity(models.Model):
    """What a site can do: rates in bytes per second, sizes in bytes. Empty fields are unknown."""

    site = models.OneToOneField(Site, on_delete=models.CASCADE, related_name="capacity")
    network_rate = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    tape_drives = models.PositiveIntegerField(null=True, blank=True)
    tape_drive_rate = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    staging_request_limit = models.PositiveIntegerField(null=True, blank=True)
    disk_size = models.PositiveBigIntegerField(null=True, blank=True)
    tape_size = models.PositiveBigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "capacities"

    def __str__(self) -> str:
        return f"capacity of {self.site}"

    @property
    def tape_rate(self) -> float | None:
        """All drives together, bytes per second."""
        if self.tape_drives is None or self.tape_drive_rate is None:
            return None
        return self.tape_drives * self.tape_drive_rate


class Membership(models.Model):
    """A role a user holds: a site admin for one site, a DDM service for one experiment, or a global role."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices)
    site = models.ForeignKey(Site, on_delete=models.CASCADE, null=True, blank=True, related_name="memberships")
    experiment = models.ForeignKey(
        Experiment, on_delete=models.CASCADE, null=True, blank=True, related_name="memberships"
    )

    class Meta:
        ordering = ["user__username", "role"]
        constraints = [
            models.CheckConstraint(
                condition=~models.Q(role=Role.SITE_ADMIN) | models.Q(site__isnull=False),
                name="membership_site_admin_has_site",
            ),
            models.CheckConstraint(
                condition=~models.Q(role=Role.DDM) | models.Q(experiment__isnull=False),
                name="membership_ddm_has_experiment",
            ),
            models.UniqueConstraint(
                fields=["user", "role", "site", "experiment"], name="membership_unique", nulls_distinct=False
            ),
        ]

    def __str__(self) -> str:
        scope = self.site or self.experiment
        return f"{self.user} {self.role}" + (f" of {scope}" if scope else "")


class ApiToken(models.Model):
    """An API key: shown once, stored as a SHA-256 hash, with an expiry, a last-used time and revocation."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    membership = models.ForeignKey(
        Membership,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="tokens",
        help_text="the one role this token carries; empty: all of its user's roles",
    )
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=8, db_index=True, help_text="the key's first characters, to recognise it")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    expires = models.DateTimeField()
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created"]

    def __str__(self) -> str:
        return f"{self.prefix}... ({self.user})"


class SiteAgent(models.Model):
    """A site's agent (the `agent/` package a site runs): its own credential, an API key stored as a SHA-256 hash,
    that lets it take and report its own site's work and nothing else; revoked or rotated from the portal. What it
    last said of itself (version, probe kinds, work in flight) is kept here for the operators."""

    site = models.ForeignKey(Site, on_delete=models.CASCADE, related_name="agents")
    name = models.CharField(max_length=64, default="agent", help_text="which of the site's agents (one per host)")
    prefix = models.CharField(max_length=8, db_index=True, help_text="the key's first characters, to recognise it")
    key_hash = models.CharField(max_length=64, unique=True)
    created = models.DateTimeField(auto_now_add=True)
    rotated = models.DateTimeField(null=True, blank=True, help_text="when its key was last replaced")
    revoked = models.DateTimeField(null=True, blank=True)
    version = models.CharField(max_length=32, blank=True, help_text="the agent's version, as it last said")
    kinds = ArrayField(models.CharField(max_length=16), default=list, blank=True, help_text="probe kinds it runs")
    in_flight = models.PositiveIntegerField(default=0, help_text="jobs it was running when it last reported")
    last_seen = models.DateTimeField(null=True, blank=True, help_text="its last call to the portal")

    class Meta:
        ordering = ["site__name", "name"]
        constraints = [models.UniqueConstraint(fields=["site", "name"], name="siteagent_unique_name")]

    def __str__(self) -> str:
        return f"{self.site.name}/{self.name}"

    def silent_seconds(self, at: datetime) -> float:
        """How long the agent has been silent at `at`: since its last call, or since its enrolment when it never
        called (the now board's `agent_silent` and /metrics read this one figure)."""
        return max((at - (self.last_seen or self.created)).total_seconds(), 0.0)
