"""Enumerations of challenges and their activities."""

from django.db import models


class ActivityKind(models.TextChoices):
    TRANSFER = "transfer", "transfer"
    STAGING = "staging", "staging (tape recall)"
    TAPE_WRITE = "tape-write", "tape write"
    NETWORK = "network", "network"
    CACHE = "cache", "cache"
    IO = "io", "I/O"


# Kinds whose targets load a site's tape drives rather than its network.
TAPE_KINDS = (ActivityKind.STAGING, ActivityKind.TAPE_WRITE)


class CopyMode(models.TextChoices):
    PULL = "pull", "pull"
    PUSH = "push", "push"
    STREAMED = "streamed", "streamed"


class Direction(models.TextChoices):
    IN = "in", "into the site"
    OUT = "out", "out of the site"


# Modes the WLCG tape challenges name; any other text is allowed too.
KNOWN_MODES = ("DT", "A-DT")
