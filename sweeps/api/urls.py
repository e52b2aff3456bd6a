"""Sweeps API routes under /api/v1/."""

from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("sweeps", views.SweepViewSet, basename="sweep")

urlpatterns = router.urls
