from django.contrib import admin
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path

from boincweb import views


def favicon(request):
    """Browsers ask for /favicon.ico on pages that name no icon (the BOINC master page)."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("project/worlds/", include("world.urls")),
    path("project/", include("backend.urls")),
    path("lab/", include("scheduling.urls")),
    path("boinc/", include("protocol.urls")),
]
