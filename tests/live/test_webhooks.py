"""The webhook guard against server-side request forgery: only http(s), only public hosts (by every address a name
resolves to) unless ALERT_WEBHOOK_PRIVATE_HOSTS allows private ones, with messages that say what to do."""

from __future__ import annotations

import pytest
from django.test import override_settings

from live.webhooks import webhook_url_problem

HINT = "refused (set ALERT_WEBHOOK_PRIVATE_HOSTS=true to allow private hosts)"


@pytest.mark.parametrize(
    ("url", "what"),
    [
        ("http://127.0.0.1:8080/hook", "127.0.0.1 is a loopback address"),
        ("https://10.0.0.1/hook", "10.0.0.1 is a private address"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"),
        ("http://0.0.0.0/", "0.0.0.0 is an unspecified address"),
        ("http://224.0.0.1/", "224.0.0.1 is a multicast address"),
        ("http://240.0.0.1/", "240.0.0.1 is a reserved address"),
        ("http://[::1]/", "::1 is a loopback address"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 resolves to ::ffff:7f00:1, a loopback address"),
        ("http://100.64.0.1/", "100.64.0.1 is not a public address"),
    ],
)
def test_a_webhook_to_a_host_that_is_not_public_is_refused(url: str, what: str) -> None:
    assert webhook_url_problem(url) == f"the webhook's host {what}: {HINT}"


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://files.example.org/hook", "webhook URLs must be http or https"),
        ("file:///etc/passwd", "webhook URLs must be http or https"),
        ("http://:80/", "the webhook URL has no host"),
    ],
)
def test_a_webhook_url_that_is_not_http_to_a_host_is_refused(url: str, problem: str) -> None:
    assert webhook_url_problem(url) == problem


def test_a_name_that_resolves_to_loopback_is_refused_with_the_address() -> None:
    problem = webhook_url_problem("http://localhost:8000/hook")
    assert problem is not None and problem.startswith("the webhook's host localhost resolves to ")
    assert problem.endswith(f", a loopback address: {HINT}")


def test_a_port_out_of_range_is_refused() -> None:
    problem = webhook_url_problem("http://example.org:99999/")
    assert problem is not None and problem.startswith("the webhook URL is not valid: ")


def test_a_host_that_does_not_resolve_is_refused() -> None:
    problem = webhook_url_problem("https://no-such-host.invalid/hook")
    assert problem is not None and problem.startswith("the webhook's host no-such-host.invalid could not be resolved")


@pytest.mark.parametrize("url", ["https://93.184.216.34/hook", "http://[2606:2800:220:1::1]:8443/x?y=1"])
def test_a_public_address_may_be_posted_to(url: str) -> None:
    assert webhook_url_problem(url) is None


@override_settings(ALERT_WEBHOOK_PRIVATE_HOSTS=True)
@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/hook", "http://localhost/", "http://10.0.0.1/"])
def test_private_hosts_may_be_allowed_by_the_deployment(url: str) -> None:
    assert webhook_url_problem(url) is None


@override_settings(ALERT_WEBHOOK_PRIVATE_HOSTS=True)
def test_the_scheme_is_checked_even_when_private_hosts_are_allowed() -> None:
    assert webhook_url_problem("ftp://127.0.0.1/") == "webhook URLs must be http or https"
