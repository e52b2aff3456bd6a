"""The report's doors: GET /api/v1/challenges/SLUG/report/?format=..., the page /challenges/SLUG/report/, and
manage.py challenge_report."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

from .world import World, user_with

pytestmark = pytest.mark.django_db
URL = "/api/v1/challenges/dc22/report/"


def _client(user: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_the_json_reports_target_figures_equal_the_rates_apis_for_every_target(world: World) -> None:
    client = _client(user_with("viewer"))
    report = client.get(URL, {"format": "json"})
    assert report.status_code == 200 and report["Content-Type"] == "application/json"
    rows = {row["id"]: row for section in report.json()["experiments"] for row in section["targets"]}
    rates = client.get("/api/v1/challenges/dc22/rates/").json()["rows"]
    assert len(rates) == 4 and rows == {row["id"]: row for row in rates}


@pytest.mark.parametrize(
    ("format", "content_type", "start"),
    [("html", "text/html; charset=utf-8", b"<!doctype html>"), ("pdf", "application/pdf", b"%PDF-"),
     ("md", "application/zip", b"PK\x03\x04")],
)  # fmt: skip
def test_each_format_is_served_with_its_content_type(
    world: World, format: str, content_type: str, start: bytes
) -> None:
    response = _client(user_with("viewer")).get(URL, {"format": format})
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == content_type and response.content.startswith(start)
    assert "dc22-report." in response["Content-Disposition"]


def test_a_format_there_is_not_is_a_json_400_naming_it(world: World) -> None:
    response = _client(user_with("viewer")).get(URL, {"format": "docx"})
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert "format must be one of json, html, pdf, md" in response.json()["format"][0]


def test_a_challenge_there_is_not_is_a_json_404(world: World) -> None:
    response = _client(user_with("viewer")).get("/api/v1/challenges/nope/report/", {"format": "pdf"})
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_an_anonymous_caller_reads_no_report(world: World) -> None:
    assert APIClient().get(URL).status_code in (401, 403)


def test_a_ddm_tokens_report_holds_its_experiment_only(world: World) -> None:
    from sites.tokens import token_create

    user = user_with("ddm", experiment=world.cms)
    _, key = token_create(user=user, name="cms")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    content = client.get(URL).json()
    assert [section["experiment"] for section in content["experiments"]] == ["CMS"]
    assert "atlas" not in str(content["experiments"]).lower()


def test_the_page_shows_the_report_and_its_downloads(world: World) -> None:
    client = Client()
    client.force_login(user_with("viewer"))  # type: ignore[arg-type]
    page = client.get("/challenges/dc22/report/").content.decode()
    for text in ("1. Introduction", "8. Summary", "GGUS 156789", "?format=pdf", "data:image/png;base64,"):
        assert text in page, text


def test_the_command_writes_the_report_in_each_format(world: World, tmp_path: Path) -> None:
    for format in ("json", "html", "pdf", "md"):
        output = tmp_path / f"r.{format}"
        call_command("challenge_report", "dc22", "--format", format, "--output", str(output), stderr=io.StringIO())
        assert output.stat().st_size > 1000
    assert "report.md" in zipfile.ZipFile(tmp_path / "r.md").namelist()
    assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF-")
