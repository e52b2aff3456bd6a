"""Enumerations of the registry."""

from django.db import models


class Implementation(models.TextChoices):
    DCACHE = "dCache", "dCache"
    EOS = "EOS", "EOS"
    STORM = "StoRM", "StoRM"
    XROOTD = "XRootD", "XRootD"
    CTA = "CTA", "CTA"
    ECHO = "Echo", "Echo"
    DPM = "DPM", "DPM"
    OTHER = "other", "other"


class EndpointKind(models.TextChoices):
    DISK = "disk", "disk"
    TAPE = "tape", "tape"
    CACHE = "cache", "cache"


class TpcMode(models.TextChoices):
    PULL = "pull", "pull"
    PUSH = "push", "push"
    STREAMED = "streamed", "streamed"


class Role(models.TextChoices):
    """What a person or a service may do (see sites/permissions.py)."""

    COORDINATOR = "coordinator", "coordinator"
    SITE_ADMIN = "site-admin", "site admin"
    DDM = "ddm", "DDM service"
    VIEWER = "viewer", "viewer"


# Schemes a storage endpoint may use; file:// only when SITES_ALLOW_FILE_ENDPOINTS is on (the testbed).
ENDPOINT_SCHEMES = ("root", "xroot", "davs", "https", "http", "gsiftp", "srm")
