"""The report in its formats, each rendered from the content's JSON only (so a snapshot's content renders the same
report whenever it is rendered): HTML (one self-contained file, its figures inline as PNG data URIs), PDF (that HTML
through WeasyPrint), Markdown (a zip of report.md and its figures as PNG files)."""

from __future__ import annotations

import base64
import io
import zipfile
from typing import Any

from django.template.loader import render_to_string

from reports.rendering import markdown_render

from .charts import figures_png
from .markdown import report_markdown

FORMATS = ("json", "html", "pdf", "md")
CONTENT_TYPES = {
    "json": "application/json",
    "html": "text/html; charset=utf-8",
    "pdf": "application/pdf",
    "md": "application/zip",
}
EXTENSIONS = {"json": "json", "html": "html", "pdf": "pdf", "md": "zip"}
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the zip's entries carry no time of their making: the same report, the same bytes


def report_context(content: dict[str, Any], figures: dict[str, bytes]) -> dict[str, Any]:
    """What the report's body template reads: the content, its figures as data URIs, its Markdown as HTML."""
    uris = {name: "data:image/png;base64," + base64.b64encode(png).decode("ascii") for name, png in figures.items()}
    definitions = [{"title": d["title"], "html": markdown_render(d["markdown"])} for d in content["definitions"]]
    return {
        "c": content,
        "figure_uris": uris,
        "goal_html": markdown_render(content["introduction"]["goal"] or ""),
        "definitions": definitions,
    }


def report_html(content: dict[str, Any], figures: dict[str, bytes] | None = None) -> str:
    """The report as one HTML file: every figure inline, no link to fetch."""
    figures = figures_png(content) if figures is None else figures
    return render_to_string("challenge_report/report.html", report_context(content, figures))


def report_pdf(html: str) -> bytes:
    """The HTML as a PDF (A4; every page headed by the challenge and, while it runs, that its figures are so far)."""
    from weasyprint import HTML  # imported where it is used: it loads pango, which only this needs

    pdf: bytes = HTML(string=html).write_pdf()
    return pdf


def report_markdown_zip(content: dict[str, Any], figures: dict[str, bytes] | None = None) -> bytes:
    """report.md and its figures (figures/NAME.png), zipped."""
    figures = figures_png(content) if figures is None else figures
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(_entry("report.md"), report_markdown(content).encode("utf-8"))
        for name in sorted(figures):
            archive.writestr(_entry(f"figures/{name}"), figures[name])
    return out.getvalue()


def _entry(name: str) -> zipfile.ZipInfo:
    entry = zipfile.ZipInfo(name, ZIP_TIME)
    entry.compress_type = zipfile.ZIP_DEFLATED
    entry.external_attr = 0o644 << 16  # rw-r--r-- when unzipped
    return entry


def report_render(content: dict[str, Any], *, format: str) -> bytes:
    """The report (content as JSON values) in `format`, one of FORMATS, as bytes."""
    if format == "json":
        import json

        return json.dumps(content, indent=1, ensure_ascii=False).encode("utf-8")
    if format == "md":
        return report_markdown_zip(content)
    html = report_html(content)
    return report_pdf(html) if format == "pdf" else html.encode("utf-8")
