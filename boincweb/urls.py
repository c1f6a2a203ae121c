from django.contrib import admin
from django.urls import include, path

from boincweb import views

urlpatterns = [
    path("", views.home, name="home"),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("project/worlds/", include("world.urls")),
    path("project/", include("backend.urls")),
    path("lab/", include("scheduling.urls")),
    path("boinc/", include("protocol.urls")),
]
