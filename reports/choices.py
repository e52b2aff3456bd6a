"""Enumerations of the site reports."""

from django.db import models


class ReportStatus(models.TextChoices):
    """Where a report is in its review: the site admins write a draft and submit it; a coordinator accepts it or
    asks for changes (which the site admins make and submit again)."""

    DRAFT = "draft", "draft"
    SUBMITTED = "submitted", "submitted"
    CHANGES_REQUESTED = "changes-requested", "changes requested"
    ACCEPTED = "accepted", "accepted"


class RateDirection(models.TextChoices):
    IN = "in", "in"
    OUT = "out", "out"
    LINK = "link", "link"


class ProblemCategory(models.TextChoices):
    NETWORK = "network", "network"
    STORAGE = "storage", "storage"
    TAPE = "tape", "tape"
    TRANSFER_SERVICE = "transfer-service", "transfer service (FTS, Rucio)"
    AUTHENTICATION = "authentication", "authentication (tokens, certificates)"
    CONFIGURATION = "configuration", "configuration"
    HARDWARE = "hardware", "hardware"
    OTHER = "other", "other"


class CommentKind(models.TextChoices):
    COMMENT = "comment", "comment"
    CHANGES_REQUESTED = "changes-requested", "asked for changes"
    ACCEPTED = "accepted", "accepted"
    SUBMITTED = "submitted", "submitted"
