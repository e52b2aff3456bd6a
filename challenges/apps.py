from django.apps import AppConfig


class ChallengesConfig(AppConfig):
    """What is planned: challenges, activities on the shared clock, targets, the load planner, calendars."""

    name = "challenges"
