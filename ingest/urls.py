from django.urls import path

from . import views

app_name = "ingest"
urlpatterns = [path("unknown-hosts/", views.unknown_hosts_page, name="unknown-hosts")]
