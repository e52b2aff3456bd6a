"""/api/v1/ routes of the now board, the link panel and the alerts (the subscriptions' are in live/api/urls.py)."""

from django.urls import path
from rest_framework.routers import SimpleRouter

from .. import link_views
from . import views as alert_views

router = SimpleRouter()
router.register("alerts", alert_views.AlertViewSet, basename="alert")

urlpatterns = [
    path("challenges/<slug:slug>/now/", alert_views.NowBoardView.as_view(), name="challenge-now"),
    path("challenges/<slug:slug>/links/", link_views.LinkPanelView.as_view(), name="challenge-links"),
    *router.urls,
]
