from django.urls import path

from . import views

app_name = "live"

urlpatterns = [
    path("<slug:slug>/now/", views.challenge_now, name="now"),
    path("<slug:slug>/links/", views.challenge_links_page, name="links"),
    path(
        "<slug:slug>/now/alerts/<int:pk>/acknowledge/",
        views.alert_act,
        {"action": "acknowledge"},
        name="alert-acknowledge",
    ),
    path("<slug:slug>/now/alerts/<int:pk>/silence/", views.alert_act, {"action": "silence"}, name="alert-silence"),
]
