"""Registry API routes under /api/v1/."""

from rest_framework.routers import DefaultRouter

from . import agents, views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("experiments", views.ExperimentViewSet)
router.register("sites", views.SiteViewSet)
router.register("endpoints", views.StorageEndpointViewSet)
router.register("hosts", views.NetworkHostViewSet)
router.register("capacities", views.CapacityViewSet)
router.register("agents", agents.SiteAgentViewSet, basename="siteagent")

urlpatterns = router.urls
