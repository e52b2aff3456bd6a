"""Site reports API routes under /api/v1/."""

from rest_framework.routers import DefaultRouter

from . import views
from .experiments import ExperimentReportViewSet

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("reports", views.SiteReportViewSet)
router.register("experiment-reports", ExperimentReportViewSet)

urlpatterns = router.urls
