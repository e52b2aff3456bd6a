"""The words of the live app: the kinds and states of alerts, the formats and fates of their deliveries."""

from django.db import models


class AlertKind(models.TextChoices):
    TARGET_AT_RISK = "target_at_risk", "target at risk"
    THROUGHPUT_DROP = "throughput_drop", "throughput drop"
    SITE_MULTI_DROP = "site_multi_drop", "bandwidth down on several links of a site"
    NO_TRAFFIC = "no_traffic", "no traffic"
    FAILURE_SPIKE = "failure_spike", "failure spike"
    SOURCE_SILENT = "source_silent", "source silent"
    AGENT_SILENT = "agent_silent", "site agent silent"


class AlertState(models.TextChoices):
    OPEN = "open", "open"
    RESOLVED = "resolved", "resolved"


class DeliveryFormat(models.TextChoices):
    JSON = "json", "JSON"
    SLACK = "slack", 'Slack / Mattermost ({"text": ...})'


class DeliveryStatus(models.TextChoices):
    PENDING = "pending", "pending"
    SENT = "sent", "sent"
    FAILED = "failed", "failed"
