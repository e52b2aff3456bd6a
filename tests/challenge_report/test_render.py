"""The report's formats, rendered from the content: HTML with every section and its figures inline, the PDF of that
HTML (its text read back with poppler's pdftotext), and the Markdown zip with report.md and the PNG figures."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from challenge_report.charts import figures_png
from challenge_report.content import content_json, report_content
from challenge_report.render import report_html, report_markdown_zip, report_pdf

from .world import World

pytestmark = pytest.mark.django_db
SECTIONS = ("1. Introduction", "2. The experiments' perspective", "3. Central services", "4. The sites' perspective",
            "5. The challenge as it happened", "6. The network", "7. Lessons learned and next steps", "8. Summary",
            "Appendix: the definitions of the figures")  # fmt: skip
# What each section shows of the world: a target row, a failure, a link, a ticket, an outage, the sweep, the summary.
FACTS = ("CERN → PIC", "Connection timed out", "GGUS 156789", "StoRM frontend restarted", "Raised the WebDAV",
         "JUNO-like sweep", "Functional test, pull", "iperf3 and path MTU", "TAPE-T1", "stable rate")  # fmt: skip


@pytest.fixture
def content(world: World) -> dict:
    return content_json(report_content(challenge=world.challenge, user=None))


def test_the_html_holds_every_section_and_its_figures_inline(content: dict) -> None:
    html = report_html(content)
    for text in (*SECTIONS, *FACTS):
        assert text.replace("'", "&#x27;") in html or text in html, text
    images = re.findall(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]+"', html)
    assert len(images) == len(content["figures"]) == 4  # ATLAS: two activities and failures; CMS: one activity
    assert 'src="http' not in html and "<link" not in html  # nothing to fetch: one self-contained file
    assert "DRAFT-NOT-SHOWN" not in html


def test_the_figures_are_png_images_and_the_same_data_give_the_same_bytes(content: dict) -> None:
    first, second = figures_png(content), figures_png(content)
    assert first == second
    assert all(png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5000 for png in first.values())


@pytest.mark.skipif(shutil.which("pdftotext") is None, reason="poppler-utils is not installed")
def test_the_pdf_holds_every_section(content: dict, tmp_path: Path) -> None:
    pdf = report_pdf(report_html(content))
    assert pdf.startswith(b"%PDF-")
    (tmp_path / "report.pdf").write_bytes(pdf)
    subprocess.run(["pdftotext", "-layout", str(tmp_path / "report.pdf"), str(tmp_path / "report.txt")], check=True)
    text = (tmp_path / "report.txt").read_text()
    for fact in (*SECTIONS, *FACTS):
        assert fact in text, fact
    pages = text.count("\f")
    assert pages >= 3 and text.count("the challenge report") >= pages  # the running head on every page


def test_the_markdown_zip_holds_report_md_and_its_figures(content: dict) -> None:
    archive = zipfile.ZipFile(io.BytesIO(report_markdown_zip(content)))
    names = set(archive.namelist())
    assert names == {"report.md", *(f"figures/{name}" for name in content["figures"])}
    markdown = archive.read("report.md").decode()
    for text in (*SECTIONS, *FACTS):
        assert text in markdown, text
    for name in content["figures"]:
        assert f"](figures/{name})" in markdown
    assert report_markdown_zip(content) == report_markdown_zip(content)


def test_a_running_challenges_report_says_so_on_every_page(world: World, tmp_path: Path) -> None:
    from .world import at

    running = content_json(report_content(challenge=world.challenge, user=None, now=at(300)))
    html = report_html(running)
    assert 'id="so-far"' in html and "(so far)" in html
    (tmp_path / "r.pdf").write_bytes(report_pdf(html))
    subprocess.run(["pdftotext", str(tmp_path / "r.pdf"), str(tmp_path / "r.txt")], check=True)
    pages = (tmp_path / "r.txt").read_text().split("\f")[:-1]
    assert pages and all("Challenge running: figures so far" in page for page in pages)
    markdown = zipfile.ZipFile(io.BytesIO(report_markdown_zip(running))).read("report.md").decode()
    assert markdown.count("> **Challenge running: figures so far") >= 5


def test_a_challenge_not_started_yet_renders_every_format(world: World) -> None:
    from .world import at

    early = content_json(report_content(challenge=world.challenge, user=None, now=at(-60)))
    assert early["state"] == "not started" and early["figures"] == {}
    assert {row["verdict"] for x in early["experiments"] for row in x["targets"]} == {"not started"}
    assert "Challenge not started: figures so far" in report_html(early)
    assert zipfile.ZipFile(io.BytesIO(report_markdown_zip(early))).namelist() == ["report.md"]


def test_a_challenge_name_cannot_end_the_running_heads_css_string(world: World) -> None:
    world.challenge.name = 'DC "26" </style><script>x</script>'
    world.challenge.save()
    html = report_html(content_json(report_content(challenge=world.challenge, user=None)))
    head = html.split("</style>", 1)[0]
    assert "<script>" not in head and "\\22 26\\22 " in head
    assert html.count("</style>") == 1 and "<script>" not in html
