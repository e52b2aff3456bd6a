"""Webhooks without server-side request forgery: a subscription's URL may only lead to a public host (unless the
deployment allows private ones), checked when the subscription is saved and again right before each POST, and the
POST goes to the very address that was checked (DNS can change between the check and the connection)."""

from __future__ import annotations

import base64
import http.client
import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from django.conf import settings

TIMEOUT = 10.0  # seconds, for the connection and for each read of the answer
ANSWER_KEPT = 2000  # characters of an answer's body kept as the delivery's error
ALLOW_HINT = "set ALERT_WEBHOOK_PRIVATE_HOSTS=true to allow private hosts"

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookRefused(Exception):
    """The URL may not be posted to (its scheme, or a host that is not public); the message says why."""


@dataclass(frozen=True)
class WebhookAnswer:
    """What the webhook's server answered: its status and the start of its body."""

    status: int
    body: str


def _address_problem(address: Address) -> str | None:
    """What kind of non-public address this is, or None for a public one. Loopback and link-local come before
    private, which Python counts them in, so that the message names the most telling kind."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _address_problem(address.ipv4_mapped)
    kinds = (
        ("is_unspecified", "an unspecified"),
        ("is_loopback", "a loopback"),
        ("is_link_local", "a link-local"),
        ("is_multicast", "a multicast"),
        ("is_reserved", "a reserved"),
        ("is_private", "a private"),
    )
    for attribute, kind in kinds:
        if getattr(address, attribute):
            return f"{kind} address"
    if not address.is_global:  # shared address space (100.64/10) and the like
        return "not a public address"
    return None


def _host_addresses(host: str, port: int) -> list[Address]:
    """Every address the host resolves to (a literal address is itself). Raises WebhookRefused when it does not
    resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookRefused(f"the webhook's host {host[:200]} could not be resolved ({exc})") from exc
    addresses: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])  # no IPv6 zone
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise WebhookRefused(f"the webhook's host {host[:200]} could not be resolved (no address)")
    return addresses


@dataclass(frozen=True)
class _Target:
    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[Address, ...]
    authorization: str | None


def _target(url: str) -> _Target:
    """The URL checked and resolved: where to connect. Raises WebhookRefused with the reason."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise WebhookRefused(f"the webhook URL is not valid: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise WebhookRefused("webhook URLs must be http or https")
    host = parts.hostname or ""
    if not host:
        raise WebhookRefused("the webhook URL has no host")
    port = port or (443 if scheme == "https" else 80)
    addresses = _host_addresses(host, port)
    if not settings.ALERT_WEBHOOK_PRIVATE_HOSTS:
        for address in addresses:
            kind = _address_problem(address)
            if kind is None:
                continue
            if host == str(address):
                raise WebhookRefused(f"the webhook's host {host} is {kind}: refused ({ALLOW_HINT})")
            raise WebhookRefused(f"the webhook's host {host} resolves to {address}, {kind}: refused ({ALLOW_HINT})")
    authorization = None
    if parts.username is not None:
        credentials = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(credentials.encode()).decode()
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Target(scheme, host, port, path, tuple(addresses), authorization)


def webhook_url_problem(url: str) -> str | None:
    """Why the portal may not post to this URL (not http(s), a host that does not resolve, or one that resolves to
    a private, loopback, link-local, multicast, reserved or unspecified address while ALERT_WEBHOOK_PRIVATE_HOSTS is
    off), or None when it may."""
    try:
        _target(url)
    except WebhookRefused as exc:
        return str(exc)
    return None


def _connection(target: _Target) -> http.client.HTTPConnection:
    """A connection to the checked address, with the URL's host name for the Host header, SNI and the
    certificate's check."""
    connection_class = http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(target.host, target.port, timeout=TIMEOUT)

    def connect_to_checked_address(address: tuple[str, int], *args: Any, **kwargs: Any) -> socket.socket:
        error: OSError | None = None
        for checked in target.addresses:  # in the resolver's order, as socket.create_connection tries them
            try:
                return socket.create_connection((str(checked), address[1]), *args, **kwargs)
            except OSError as exc:
                error = exc
        raise error or OSError("no address to connect to")

    connection._create_connection = connect_to_checked_address  # type: ignore[attr-defined]
    return connection


def webhook_post(*, url: str, body: bytes) -> WebhookAnswer:
    """POST a JSON body to the URL, checked again first and connected to the address the check resolved. No
    redirect is followed (a 3xx is the answer). Raises WebhookRefused when the URL is refused, OSError (timeouts
    included) and http.client.HTTPException when the exchange fails."""
    target = _target(url)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "data-challenge-portal/1 (alerts)",
        "Content-Length": str(len(body)),
    }
    if target.authorization:
        headers["Authorization"] = target.authorization
    connection = _connection(target)
    try:
        connection.request("POST", target.path, body=body, headers=headers)
        response = connection.getresponse()
        text = response.read(ANSWER_KEPT * 4).decode("utf-8", errors="replace")[:ANSWER_KEPT]
        if 300 <= response.status < 400:
            text = f"redirected to {str(response.getheader('Location', '?'))[:500]}: not followed. {text}"
        return WebhookAnswer(status=response.status, body=text)
    finally:
        connection.close()
