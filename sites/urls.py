from django.urls import path

from . import views

app_name = "sites"
urlpatterns = [
    path("", views.site_list, name="list"),
    path("<path:name>/", views.site_detail, name="detail"),  # a name may hold "/"
]
