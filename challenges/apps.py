import math
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks


class ChallengesConfig(AppConfig):
    """What is planned: challenges, activities on the shared clock, targets, the load planner, calendars."""

    name = "challenges"

    def ready(self) -> None:
        checks.register(target_rate_max_check)


def target_rate_max_check(app_configs: Any, **kwargs: Any) -> list[checks.CheckMessage]:
    """TARGET_RATE_MAX is a finite positive number of bytes per second no larger than TARGET_RATE_CEILING, the most
    whose arithmetic stays finite everywhere a target is read."""
    from .models import TARGET_RATE_CEILING  # models are not loaded when this module is imported

    value = getattr(settings, "TARGET_RATE_MAX", None)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and math.isfinite(value) and 0 < value <= TARGET_RATE_CEILING:  # type: ignore[arg-type, operator]
        return []
    return [
        checks.Error(
            f"TARGET_RATE_MAX is {value!r}: it must be a number of bytes per second above 0 and at most "
            f"{TARGET_RATE_CEILING:.0f} (8 Pb/s)",
            hint="set it in the environment, such as TARGET_RATE_MAX=1250000000000 (10 Tb/s, the default)",
            id="challenges.E001",
        )
    ]
