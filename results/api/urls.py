"""Results API routes under /api/v1/: rates of a challenge, transfer records, failure-cause rules."""

from django.urls import path
from rest_framework.routers import DefaultRouter

from . import views
from .records import FailureRuleViewSet, TransferRecordViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("records", TransferRecordViewSet)
router.register("failure-rules", FailureRuleViewSet)

urlpatterns = [
    path("challenges/<slug:slug>/rates/", views.ChallengeRatesView.as_view(), name="challenge-rates"),
    *router.urls,
]
