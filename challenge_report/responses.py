"""A rendered report as an HTTP response, for the API and the pages alike."""

from __future__ import annotations

from django.http import HttpResponse

from .selectors import RenderedReport


def report_response(report: RenderedReport, *, inline: bool = True) -> HttpResponse:
    """The rendered report as a download (PDF and HTML open in the browser; the zip and JSON are saved)."""
    response = HttpResponse(report.body, content_type=report.content_type)
    disposition = (
        "inline" if inline and report.content_type.startswith(("text/html", "application/pdf")) else "attachment"
    )
    response["Content-Disposition"] = f'{disposition}; filename="{report.filename}"'
    return response
