from django.apps import AppConfig


class ChallengeReportConfig(AppConfig):
    """The challenge report: one click from the portal's data to the report a challenge ends with."""

    name = "challenge_report"
