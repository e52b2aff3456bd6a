"""The agent's one connection: HTTPS to the portal's agent API (plain HTTP only to a testbed address), with the
agent's key. Standard library only."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any

from . import VERSION
from .config import AgentConfig


class PortalUnreachable(Exception):
    """The portal did not answer (down, the link broken, a 5xx, a 429): try again later."""


class PortalRefused(Exception):
    """The portal answered 4xx: it will not take this request as it is (the status and the portal's words)."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status, self.body = status, body


class Portal:
    def __init__(self, config: AgentConfig) -> None:
        self.base = f"{config.portal_url}/api/v1/agent"
        self.headers = {
            "Authorization": f"Agent {config.key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"portal-agent/{VERSION} ({config.site})",
        }
        self.tls = ssl.create_default_context(cafile=config.ca_bundle or None)  # verified, always

    def call(self, path: str, body: dict[str, Any], *, timeout: float = 30) -> Any:
        request = urllib.request.Request(
            f"{self.base}/{path}", data=json.dumps(body, default=str).encode(), headers=self.headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.tls) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            text = exc.read()[:2000]
            try:
                detail = json.loads(text)
            except ValueError:
                detail = text.decode(errors="replace")
            if exc.code >= 500 or exc.code == 429:
                raise PortalUnreachable(f"{exc.code}: {detail}") from None
            raise PortalRefused(exc.code, detail) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise PortalUnreachable(str(exc)) from None

    def claim(self, *, most: int, wait: float) -> list[dict[str, Any]]:
        answer = self.call("jobs/claim/", {"most": most, "wait": wait}, timeout=wait + 15)
        return list(answer.get("jobs") or [])

    def heartbeat(self, *, kinds: list[str], in_flight: list[dict[str, int]]) -> list[int]:
        answer = self.call("heartbeat/", {"version": VERSION, "kinds": kinds, "in_flight": in_flight})
        return [int(job) for job in answer.get("stop") or []]

    def result(self, job_id: int, attempt: int, result: dict[str, Any]) -> bool:
        answer = self.call(f"jobs/{job_id}/result/", {**result, "attempt": attempt}, timeout=120)
        return bool(answer.get("stored"))
