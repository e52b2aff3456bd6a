"""The challenge report's page, /challenges/SLUG/report/: the report as it is now (the same body as its HTML file),
its downloads (JSON, HTML, PDF, Markdown zip through the API), and its snapshots."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from challenges.selectors import challenge_for
from challenges.views import read_access

from .charts import figures_png
from .content import content_json, report_content
from .render import report_context


@require_GET
@read_access
def challenge_report_page(request: HttpRequest, slug: str) -> HttpResponse:
    challenge = challenge_for(slug=slug, user=request.user)
    content = content_json(report_content(challenge=challenge, user=request.user))
    context = report_context(content, figures_png(content)) | {"challenge": challenge}
    return render(request, "challenge_report/page.html", context)
