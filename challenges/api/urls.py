"""Planning API routes under /api/v1/."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("challenges", views.ChallengeViewSet)
router.register("activities", views.ActivityViewSet)
router.register("targets", views.TargetViewSet)

urlpatterns = [
    path("clock/now/", views.ClockNowView.as_view(), name="clock-now"),
    *router.urls,
]
