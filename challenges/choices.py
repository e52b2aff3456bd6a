"""Enumerations of challenges and their activities."""

from django.db import models


class ActivityKind(models.TextChoices):
    TRANSFER = "transfer", "transfer"
    STAGING = "staging", "staging (tape recall)"
    TAPE_WRITE = "tape-write", "tape write"
    NETWORK = "network", "network"
    CACHE = "cache", "cache"
    IO = "io", "I/O"


# Kinds whose activities claim no transfer records: a network target is measured by its iperf3 runs.
UNCLAIMING_KINDS = (ActivityKind.NETWORK,)

# Kinds whose targets load a site's tape drives rather than its network.
TAPE_KINDS = (ActivityKind.STAGING, ActivityKind.TAPE_WRITE)


class CopyMode(models.TextChoices):
    PULL = "pull", "pull"
    PUSH = "push", "push"
    STREAMED = "streamed", "streamed"


class Direction(models.TextChoices):
    IN = "in", "into the site"
    OUT = "out", "out of the site"


# Modes the WLCG challenges name (T0: the export from the Tier-0; DT and A-DT: the tape challenges' writes and
# recalls); any other text is allowed too: the forms suggest these, nothing enforces them.
KNOWN_MODES = ("T0", "DT", "A-DT")
