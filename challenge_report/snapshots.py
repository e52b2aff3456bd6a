"""Snapshots of the challenge report: made (content, HTML, PDF, Markdown and figures frozen together, with a
version, its author, its time and the SHA-256 of its PDF), read back byte for byte, shared by a public link that
needs no account (revocable), and compared (the targets whose figures or verdicts moved between two).

Making one and sharing it is the access policy's "publish" (coordinators); a snapshot holds every experiment's part,
so it is read by those who read every experiment (the policy's "view" reaching every row), and by its link."""

from __future__ import annotations

import base64
import hashlib
import secrets
from datetime import datetime
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from challenges.models import Challenge
from sites.roles import action_reach, action_refusal, user_may

from .charts import figures_png
from .content import content_json, report_content
from .models import ReportNotes, ReportSnapshot
from .render import CONTENT_TYPES, EXTENSIONS, report_html, report_markdown_zip, report_pdf
from .selectors import RenderedReport

FIGURES_COMPARED = ("volume", "average_rate", "max_rate", "stable_rate", "files_ok", "files_failed", "verdict")


def snapshot_create(*, challenge: Challenge, user: Any, now: datetime | None = None) -> ReportSnapshot:
    """Freeze the report as it is now (what `user` reads of it) as the challenge's next version."""
    if not user_may(user=user, action="publish"):
        raise PermissionDenied(action_refusal(user=user, action="publish"))
    content = content_json(report_content(challenge=challenge, user=user, now=now))
    figures = figures_png(content)
    html = report_html(content, figures)
    pdf = report_pdf(html)
    with transaction.atomic():
        # The challenge's row locked to the commit: two snapshots made at once get two versions, one after the other.
        Challenge.objects.select_for_update().filter(pk=challenge.pk).first()
        latest = ReportSnapshot.objects.filter(challenge=challenge).aggregate(latest=Max("version"))["latest"]
        return ReportSnapshot.objects.create(
            challenge=challenge,
            version=(latest or 0) + 1,
            author=user,
            created_at=timezone.now(),
            at=parse_datetime(content["at"]),
            state=content["state"],
            content=content,
            html=html,
            pdf=pdf,
            markdown_zip=report_markdown_zip(content, figures),
            figures={name: base64.b64encode(png).decode("ascii") for name, png in figures.items()},
            pdf_sha256=hashlib.sha256(pdf).hexdigest(),
        )


def snapshots_readable(*, challenge: Challenge, user: Any) -> QuerySet[ReportSnapshot]:
    """The challenge's snapshots the user may read, newest first: all for a reader of every experiment, else none."""
    snapshots = ReportSnapshot.objects.filter(challenge=challenge).select_related("author", "challenge")
    return snapshots if action_reach(user=user, action="view").every else snapshots.none()


def snapshot_rendered(*, snapshot: ReportSnapshot, format: str) -> RenderedReport:
    """The snapshot in `format`, the bytes stored when it was made."""
    body = {
        "json": lambda: _json(snapshot.content),
        "html": lambda: snapshot.html.encode("utf-8"),
        "pdf": lambda: bytes(snapshot.pdf),
        "md": lambda: bytes(snapshot.markdown_zip),
    }[format]()
    name = f"{snapshot.challenge.slug}-report-v{snapshot.version}.{EXTENSIONS[format]}"
    return RenderedReport(body, CONTENT_TYPES[format], name)


def _json(content: dict[str, Any]) -> bytes:
    import json

    return json.dumps(content, indent=1, ensure_ascii=False).encode("utf-8")


def snapshot_publish(*, snapshot: ReportSnapshot, user: Any, public: bool) -> ReportSnapshot:
    """Open the snapshot to anyone with its link (a new key each time), or revoke the link."""
    if not user_may(user=user, action="publish"):
        raise PermissionDenied(action_refusal(user=user, action="publish"))
    snapshot.public_key = secrets.token_urlsafe(32) if public else None
    snapshot.published_at = timezone.now() if public else None
    snapshot.save(update_fields=["public_key", "published_at"])
    return snapshot


def snapshot_shared(*, key: str) -> ReportSnapshot | None:
    """The snapshot a public link opens (None when there is none, or it was revoked)."""
    if not key or len(key) > 64:
        return None
    return ReportSnapshot.objects.select_related("challenge").filter(public_key=key).first()


def _targets(snapshot: ReportSnapshot) -> dict[int, dict[str, Any]]:
    return {row["id"]: row for section in snapshot.content.get("experiments", []) for row in section["targets"]}


def snapshots_compare(*, earlier: ReportSnapshot, later: ReportSnapshot) -> list[dict[str, Any]]:
    """The targets whose figures or verdict moved from `earlier` to `later` (and those only one of them holds),
    with each moved figure's two values."""
    before, after = _targets(earlier), _targets(later)
    changes = []
    for target_id in sorted(before.keys() | after.keys()):
        old, new = before.get(target_id), after.get(target_id)
        row = new or old
        assert row is not None
        where = f"{row['link']['from']} → {row['link']['to']}" if row["link"] else f"{row['site']} {row['direction']}"
        moved = {
            name: {"before": old.get(name), "after": new.get(name)}
            for name in FIGURES_COMPARED
            if old is not None and new is not None and old.get(name) != new.get(name)
        }
        if old is None or new is None or moved:
            state = "added" if old is None else "removed" if new is None else "moved"
            changes.append(
                {
                    "id": target_id,
                    "activity": row["activity"],
                    "experiment": row["experiment"],
                    "where": where,
                    "change": state,
                    "figures": moved,
                }
            )
    return changes


def report_notes_save(*, challenge: Challenge, user: Any, lessons: str, next_steps: str) -> ReportNotes:
    """The coordinators' lessons and next steps for the challenge's report (the access policy's "publish")."""
    if not user_may(user=user, action="publish"):
        raise PermissionDenied(action_refusal(user=user, action="publish"))
    notes, _ = ReportNotes.objects.update_or_create(
        challenge=challenge,
        defaults={"lessons": lessons[:20_000], "next_steps": next_steps[:20_000], "updated_by": user},
    )
    return notes
