"""The handbook's examples are right against the real API: the DDM guide's curl and Python bodies are posted as they
are written (same path, same content type, a ddm token in the same header) and must get the answer the page says.
The README keeps the two commands CI and newcomers run, and stays short."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import Client

from sites.choices import Role
from sites.models import Experiment
from sites.tokens import token_issue

pytestmark = pytest.mark.django_db

ROOT = Path(settings.BASE_DIR)
DDM = ROOT / "docs" / "ddm"
# curl ... http://127.0.0.1:8000/api/v1/ingest/FORMAT/ -d '[...]'  followed by  # {"accepted":...}
CURL_JSON = re.compile(
    r'-H "Content-Type: (?P<type>[^"]+)" \\\n\s+http://127\.0\.0\.1:8000(?P<path>/api/v1/ingest/[\w-]+/) '
    r"-d '(?P<body>.*?)'\n# (?P<answer>\{.*?\})",
    re.DOTALL,
)
CURL_HEREDOC = re.compile(
    r'-H "Content-Type: (?P<type>[^"]+)" \\\n\s+http://127\.0\.0\.1:8000(?P<path>/api/v1/ingest/[\w-]+/) '
    r"--data-binary @- <<'NDJSON'\n(?P<body>.*?)\nNDJSON\n# (?P<answer>\{.*?\})",
    re.DOTALL,
)


def ddm_key() -> str:
    experiment = Experiment.objects.get_or_create(name="ATLAS")[0]
    _, key = token_issue(username="rucio-atlas", role=Role.DDM, experiment=experiment)
    return key


def examples() -> list[tuple[str, str, str, str, dict[str, Any]]]:
    found = []
    for page in sorted(DDM.glob("*.md")):
        text = page.read_text()
        for pattern in (CURL_JSON, CURL_HEREDOC):
            for match in pattern.finditer(text):
                found.append(
                    (page.name, match["path"], match["type"], match["body"], json.loads(match["answer"]))
                )  # fmt: skip
    return found


def test_the_ddm_guide_has_a_curl_example_of_every_ingest_format() -> None:
    paths = {path for _, path, *_ in examples()}
    assert paths == {f"/api/v1/ingest/{name}/" for name in ("fts", "rucio", "fts-optimizer")}


@pytest.mark.parametrize("example", examples(), ids=lambda example: f"{example[0]}:{example[1]}")
def test_a_curl_example_of_the_ddm_guide_gets_the_answer_it_shows(example: tuple[Any, ...]) -> None:
    _, path, content_type, body, answer = example
    client, key = Client(), ddm_key()
    response = client.post(path, data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200, response.content
    assert response.json() == answer
    again = client.post(path, data=body, content_type=content_type, HTTP_AUTHORIZATION=f"Token {key}")
    assert again.json()["duplicates"] == answer["accepted"]  # as the page says: sent again, nothing twice


def test_the_python_perfsonar_example_of_the_ddm_guide_is_accepted() -> None:
    text = (DDM / "ingest-api.md").read_text()
    code = re.search(r"```python\n(run = \{.*?)\nresponse = ", text, re.DOTALL)
    assert code is not None
    scope: dict[str, Any] = {}
    exec(code.group(1), {}, scope)  # a dict literal, written for people to copy
    response = Client().post(
        "/api/v1/ingest/perfsonar/", data=[scope["run"]], content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {ddm_key()}",
    )  # fmt: skip
    assert response.json() == {"accepted": 1, "duplicates": 0, "skipped": 0, "rejected": []}


def test_the_readme_keeps_its_two_commands_and_stays_short() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150
    commands = [line.split("#")[0].strip() for line in lines if line.startswith("bin/portal ")]
    assert commands[:2] == ["bin/portal run", "bin/portal test"]


def test_every_link_of_the_readme_leads_to_a_file_of_the_repository() -> None:
    text = (ROOT / "README.md").read_text()
    targets = {link.split("#")[0] for link in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in link}
    assert targets, "the README links into the handbook"
    assert sorted(target for target in targets if not (ROOT / target).exists()) == []
