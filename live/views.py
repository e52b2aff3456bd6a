"""The now board's page (`/challenges/SLUG/now/`, its board refreshed every 30 s by HTMX), the alerts' buttons and
the link panel's page (`/challenges/SLUG/links/`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from challenges.selectors import challenge_for
from challenges.views import read_access
from common.units import rate_text

from .links import challenge_links
from .models import Alert
from .now import now_board
from .selectors import alerts_visible
from .services import alert_acknowledge, alert_silence

REFRESH_SECONDS = 30
SPARK_WIDTH, SPARK_HEIGHT = 120, 24


def sparkline(points: list[dict[str, Any]], target_rate: float) -> dict[str, Any]:
    """An inline SVG's polyline of a trend, scaled to its highest value or the target (drawn as a line)."""
    rates = [point["rate"] for point in points]
    top = max([*rates, target_rate, 1.0])
    step = SPARK_WIDTH / max(len(rates) - 1, 1)
    coordinates = " ".join(
        f"{index * step:.1f},{SPARK_HEIGHT - rate / top * SPARK_HEIGHT:.1f}" for index, rate in enumerate(rates)
    )
    return {
        "points": coordinates,
        "target_y": f"{SPARK_HEIGHT - target_rate / top * SPARK_HEIGHT:.1f}",
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "title": "last 6 h, 10-minute rates: " + ", ".join(rate_text(rate) for rate in rates[-6:]) + " (latest)",
    }


def _board_context(request: HttpRequest, slug: str) -> dict[str, Any]:
    challenge = challenge_for(slug=slug, user=request.user)
    board = now_board(challenge=challenge, user=request.user)
    for row in board["targets"]:
        row["spark"] = sparkline(row["trend"], row["target_rate"]) if row["trend"] else None
    history = alerts_visible(user=request.user, challenge=challenge, state="resolved")[:20]
    shown = [alert.pk for alert in board["alerts"]]
    # The buttons of the alerts the access policy lets this user act on, and no others (the services refuse the
    # rest anyway).
    may = {
        action: set(Alert.objects.restrict(request.user, action).filter(pk__in=shown).values_list("pk", flat=True))
        for action in ("acknowledge", "silence")
        if shown
    }
    return {
        "challenge": challenge,
        "board": board,
        "history": history,
        "refresh_seconds": REFRESH_SECONDS,
        "may_acknowledge": may.get("acknowledge", set()),
        "may_silence": may.get("silence", set()),
        "now": timezone.now(),
    }


@read_access
def challenge_now(request: HttpRequest, slug: str) -> HttpResponse:
    """The challenge as it runs, worst target first; its board refreshes itself every 30 s."""
    context = _board_context(request, slug)
    template = "live/now_board.html" if getattr(request, "htmx", False) else "live/now.html"
    return render(request, template, context)


@read_access
def challenge_links_page(request: HttpRequest, slug: str) -> HttpResponse:
    """The link panel: every link's rates against its target, FTS's optimizer, what limits it, its failures."""
    challenge = challenge_for(slug=slug, user=request.user)
    panel = challenge_links(challenge=challenge, user=request.user, window_errors=True)
    return render(request, "live/links.html", {"challenge": challenge, "panel": panel})


@require_POST
@read_access
def alert_act(request: HttpRequest, slug: str, pk: int, action: str) -> HttpResponse:
    """The board's buttons: acknowledge, silence for some hours, or lift a silence."""
    alert = get_object_or_404(alerts_visible(user=request.user).filter(challenge__slug=slug), pk=pk)
    try:
        if action == "acknowledge":
            alert_acknowledge(alert=alert, user=request.user)
            messages.success(request, "Acknowledged.")
        else:
            hours = request.POST.get("hours", "")
            if hours not in ("0", "1", "4", "24"):
                raise ValidationError("choose 1, 4 or 24 hours")
            until = timezone.now() + timedelta(hours=int(hours)) if hours != "0" else None
            alert_silence(alert=alert, user=request.user, until=until)
            messages.success(request, f"Silenced for {hours} h." if until else "Silence lifted.")
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    return redirect("live:now", slug=slug)
