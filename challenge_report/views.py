"""The challenge report's pages: /challenges/SLUG/report/ (the report as it is now, the same body as its HTML file;
its downloads; its snapshots, making one, sharing one, and what changed between two) and /shared/reports/KEY/ (a
shared snapshot, no account needed)."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from challenges.selectors import challenge_for
from challenges.views import read_access
from sites.roles import user_may

from .charts import figures_png
from .content import content_json, report_content
from .models import ReportNotes
from .render import report_context
from .responses import report_response
from .selectors import FormatError, format_checked
from .snapshots import (
    report_notes_save,
    snapshot_create,
    snapshot_publish,
    snapshot_rendered,
    snapshot_shared,
    snapshots_compare,
    snapshots_readable,
)


def _compared(request: HttpRequest, snapshots: list) -> dict | None:
    """?earlier=N&later=M: the targets that moved between the two snapshots."""
    earlier, later = request.GET.get("earlier", ""), request.GET.get("later", "")
    if not (earlier.isdigit() and later.isdigit()):
        return None
    by_version = {snapshot.version: snapshot for snapshot in snapshots}
    if int(earlier) not in by_version or int(later) not in by_version:
        return None
    first, second = by_version[int(earlier)], by_version[int(later)]
    return {"earlier": first, "later": second, "targets": snapshots_compare(earlier=first, later=second)}


@require_http_methods(["GET", "POST"])
@read_access
def challenge_report_page(request: HttpRequest, slug: str) -> HttpResponse:
    """GET: the page; POST (coordinators): make a snapshot of the report as it is now, or (do=notes) save their
    lessons and next steps; then the page again."""
    challenge = challenge_for(slug=slug, user=request.user)
    if request.method == "POST":
        if request.POST.get("do") == "notes":
            lessons, next_steps = request.POST.get("lessons", ""), request.POST.get("next_steps", "")
            report_notes_save(challenge=challenge, user=request.user, lessons=lessons, next_steps=next_steps)
            messages.success(request, "The lessons and next steps are saved.")
        else:
            snapshot = snapshot_create(challenge=challenge, user=request.user)
            messages.success(request, f"Snapshot {snapshot.version} made (PDF SHA-256 {snapshot.pdf_sha256[:16]}…).")
        return redirect("challenge_report:page", slug=slug)
    content = content_json(report_content(challenge=challenge, user=request.user))
    snapshots = list(snapshots_readable(challenge=challenge, user=request.user).order_by("-version"))
    context = report_context(content, figures_png(content)) | {
        "challenge": challenge,
        "snapshots": snapshots,
        "may_publish": user_may(user=request.user, action="publish"),
        "compared": _compared(request, snapshots),
        "notes": ReportNotes.objects.filter(challenge=challenge).first(),
    }
    return render(request, "challenge_report/page.html", context)


@require_POST
@read_access
def snapshot_share(request: HttpRequest, slug: str, version: int) -> HttpResponse:
    challenge = challenge_for(slug=slug, user=request.user)
    snapshot = snapshots_readable(challenge=challenge, user=request.user).filter(version=version).first()
    if snapshot is None:
        raise Http404("no such snapshot")
    public = request.POST.get("public") == "on"
    snapshot_publish(snapshot=snapshot, user=request.user, public=public)
    messages.success(request, f"Snapshot {version} is {'shared by its link' if public else 'no longer shared'}.")
    return redirect("challenge_report:page", slug=slug)


@require_GET
def shared_report(request: HttpRequest, key: str) -> HttpResponse:
    """A shared snapshot, for anyone holding its link (html unless ?format= says json, pdf or md)."""
    snapshot = snapshot_shared(key=key)
    if snapshot is None:
        raise Http404("no report is shared by this link (or its sharing was revoked)")
    try:
        format = format_checked(request.GET.get("format") or "html")
    except FormatError as error:
        return HttpResponse(str(error), status=400, content_type="text/plain; charset=utf-8")
    return report_response(snapshot_rendered(snapshot=snapshot, format=format))
