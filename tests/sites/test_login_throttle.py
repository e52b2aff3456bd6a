"""Logins are throttled (django-axes): after the limit of failures of one user name from one address, that pair
is locked out with a 429, even with the right password; another user is not."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.sites.factories import UserFactory

pytestmark = pytest.mark.django_db


@override_settings(AXES_FAILURE_LIMIT=3)
def test_too_many_failed_logins_lock_that_user_and_address_out(client: Client) -> None:
    alice = UserFactory(username="alice2")
    alice.set_password("right-password-2")
    alice.save()
    victim = UserFactory(username="bob")
    victim.set_password("bob-password")
    victim.save()
    for _ in range(2):
        answer = client.post("/accounts/login/", {"username": "alice2", "password": "guess"})
        assert answer.status_code == 200  # the form again, with its error
    assert client.post("/accounts/login/", {"username": "alice2", "password": "guess"}).status_code == 429
    locked = client.post("/accounts/login/", {"username": "alice2", "password": "right-password-2"})
    assert locked.status_code == 429  # the right password does not open a locked-out pair
    assert "_auth_user_id" not in client.session
    other = Client()
    assert other.post("/accounts/login/", {"username": "bob", "password": "bob-password"}).status_code == 302
