"""The coordinators' token page, mounted at /tokens/."""

from django.urls import path

from . import token_views

app_name = "tokens"
urlpatterns = [
    path("", token_views.token_list, name="list"),
    path("<int:pk>/revoke/", token_views.token_revoke_view, name="revoke"),
]
