"""Live API routes under /api/v1/. The subscriptions' and deliveries' prefixes are registered before the alerts'
own ("alerts", with its ids), so that alerts/subscriptions/ is never read as the alert "subscriptions"."""

from rest_framework.routers import DefaultRouter

from . import views

router = DefaultRouter(trailing_slash=True)
router.include_root_view = False
router.register("alerts/subscriptions", views.AlertSubscriptionViewSet, basename="alert-subscription")
router.register("alerts/deliveries", views.AlertDeliveryViewSet, basename="alert-delivery")

urlpatterns = router.urls
