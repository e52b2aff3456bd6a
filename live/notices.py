"""What an alert's delivery says: the JSON body of a webhook, the one line of Slack and Mattermost, an e-mail. Each
says what the alert is about once; a resolved alert's says what changed (the condition that cleared, its last
figure, when) rather than repeating how it opened."""

from __future__ import annotations

from datetime import UTC
from typing import Any
from urllib.parse import quote

from django.conf import settings

from common.times import iso_utc
from common.units import duration_text, percent_text, rate_text

from .choices import AlertKind, AlertState
from .models import Alert


def alert_now_url(*, alert: Alert) -> str:
    """The absolute link to the alert's challenge's now board."""
    return f"{settings.PORTAL_URL.rstrip('/')}/challenges/{quote(alert.challenge.slug)}/now/"


def _name(row: Any) -> str | None:
    return None if row is None else str(row.name)


def alert_payload(*, alert: Alert, state: str | None = None) -> dict[str, Any]:
    """The JSON body of a webhook: the alert as it stands, or as it stood in `state` (a delivery of the open state
    sent after the alert resolved still says open, with no resolved_at)."""
    state = state or alert.state
    link = None
    if alert.link_source_id is not None or alert.link_destination_id is not None:
        link = {"source": _name(alert.link_source), "destination": _name(alert.link_destination)}
    return {
        "alert": {
            "id": alert.pk,
            "kind": alert.kind,
            "state": state,
            "challenge": alert.challenge.slug,
            "activity": _name(alert.activity),
            "experiment": _name(alert.experiment),
            "site": _name(alert.site),
            "link": link,
            "value": alert.value,
            "threshold": alert.threshold,
            "message": alert.message,
            "started_at": iso_utc(alert.started_at),
            "resolved_at": iso_utc(alert.resolved_at) if state == AlertState.RESOLVED else None,
            "url": alert_now_url(alert=alert),
        }
    }


def _one_line(text: str) -> str:
    return " ".join(text.split())


def alert_subject(*, alert: Alert) -> str:
    """What the alert is about, as people read it: a link, a site or an activity, with its experiment."""
    if alert.link_source_id is not None or alert.link_destination_id is not None:
        about = f"{_name(alert.link_source) or '?'} → {_name(alert.link_destination) or '?'}"
    elif alert.site_id is not None:
        about = str(_name(alert.site))
    elif alert.activity_id is not None:
        about = str(_name(alert.activity))
    else:
        about = alert.subject
    return f"{about} ({alert.experiment.name})" if alert.experiment is not None else about


def _about(alert: Alert) -> tuple[str, str]:
    """What the alert is about and what its message says of it, each once. The evaluated alerts' messages begin
    with their subject ("A -> B: throughput dropped ...", "T0 export (ATLAS, A -> B): will miss: ..."): that
    beginning then names the subject, with the experiment added when it does not say it; a message that does not
    begin so follows alert_subject."""
    message = _one_line(alert.message)
    beginning, colon, rest = message.partition(": ")
    if alert.link_source_id is not None or alert.link_destination_id is not None:
        names = [_name(alert.link_source), _name(alert.link_destination)]
    elif alert.site_id is not None:
        names = [_name(alert.site)]
    elif alert.activity_id is not None:
        names = [_name(alert.activity)]
    else:
        names = [alert.subject.partition(":")[2] or alert.subject]
    if not colon or not all(name and name in beginning for name in names):
        return alert_subject(alert=alert), message
    experiment = _name(alert.experiment)
    if experiment and experiment not in beginning:
        beginning = f"{beginning} ({experiment})"
    return beginning, rest


def _kind_label(alert: Alert) -> str:
    return AlertKind(alert.kind).label if alert.kind in AlertKind.values else alert.kind


def _headline(alert: Alert, state: str) -> str:
    return _one_line(f"[{state.upper()}] {_kind_label(alert)}, {alert.challenge.slug}: {alert_subject(alert=alert)}")


def _cleared(alert: Alert) -> tuple[str, str | None]:
    """The condition that no longer holds, and the alert's last figure while it held (None when it stores none),
    in the words and units of its kind (value and threshold as live.alerts stores them)."""
    value, threshold = alert.value, alert.threshold
    figure: str | None
    if alert.kind == AlertKind.TARGET_AT_RISK:
        cleared = f"the projected average is no longer short of the target of {rate_text(threshold)}"
        figure = f"a projected average of {rate_text(value)}"
    elif alert.kind == AlertKind.THROUGHPUT_DROP:
        cleared = f"the throughput is no longer under {rate_text(threshold)}"
        figure = rate_text(value)
    elif alert.kind == AlertKind.SITE_MULTI_DROP:
        cleared = f"fewer than {threshold:.0f} of its links drop at once" if threshold else "its links recovered"
        figure = f"{value:.0f} links dropping" if value is not None else None
    elif alert.kind == AlertKind.NO_TRAFFIC:
        cleared, figure = "transfers end again", f"no transfer ended for {duration_text(value)}"
    elif alert.kind == AlertKind.FAILURE_SPIKE:
        cleared = f"fewer than {percent_text(threshold)} of the attempts fail"
        figure = f"{percent_text(value)} failed"
    elif alert.kind == AlertKind.SOURCE_SILENT:
        cleared, figure = "the source sends again", f"silent for {duration_text(value)}"
    else:
        cleared, figure = "its condition no longer holds", None
    return cleared, figure if value is not None else None


def alert_resolution(*, alert: Alert) -> str:
    """What changed when the alert resolved: when, after how long, the condition that cleared and the alert's last
    figure while it held."""
    resolved = (alert.resolved_at or alert.last_seen_at).astimezone(UTC)
    lasted = duration_text((resolved - alert.started_at).total_seconds())
    cleared, figure = _cleared(alert)
    text = f"resolved at {resolved:%Y-%m-%d %H:%M} UTC after {lasted}: {cleared}"
    if figure is not None:
        text += f" (last found at {alert.last_seen_at.astimezone(UTC):%H:%M} UTC: {figure})"
    return text


def slack_payload(*, alert: Alert, state: str | None = None) -> dict[str, str]:
    """The body Slack and Mattermost incoming webhooks take: one line with the state, kind, what it is about (once),
    the message (or, resolved, what changed) and the link to the now board."""
    state = state or alert.state
    about, message = _about(alert)
    said = alert_resolution(alert=alert) if state == AlertState.RESOLVED else message
    head = f"[{state.upper()}] {_kind_label(alert)}, {alert.challenge.slug}: {about}: {said}"
    return {"text": f"{_one_line(head)} {alert_now_url(alert=alert)}"}


def alert_mail(*, alert: Alert, state: str) -> tuple[str, str]:
    """The subject and plain-text body of an alert's e-mail; a resolved one begins with what changed."""
    payload = alert_payload(alert=alert, state=state)["alert"]
    if state == AlertState.RESOLVED:
        resolution = alert_resolution(alert=alert)
        lines = [f"{resolution[:1].upper()}{resolution[1:]}.", "", f"While it held: {alert.message}", ""]
    else:
        lines = [alert.message, ""]
    for label, key in (("Started", "started_at"), ("Resolved", "resolved_at"), ("Value", "value")):
        if payload[key] is not None:
            lines.append(f"{label}: {payload[key]}")
    if payload["threshold"] is not None:
        lines.append(f"Threshold: {payload['threshold']}")
    lines += ["", f"Now board: {payload['url']}", "", f"Alert {alert.pk}, {alert.kind}, {alert.subject}"]
    return _headline(alert, state)[:200], "\n".join(lines)
