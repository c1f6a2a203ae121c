from django.contrib import admin
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import include, path, register_converter

from backend import views as backend_views
from backend.converters import ProjectConverter
from backend.models import Project
from boincweb import views
from protocol import urls as protocol_urls

register_converter(ProjectConverter, "project")


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
    # the old paths of the one project there was: the demo project's pages
    path("project/", include("backend.urls")),
    path("projects/", backend_views.project_list, name="project_list"),
    path("projects/<project:project>/", include(("backend.urls", "project"), namespace="projects")),
    # BOINC's endpoints of each project; the slug is looked up by the views, since an unknown
    # project's scheduler still answers in BOINC's reply format (protocol.views). An app
    # namespace of their own, so that a page under them still reverses "boinc:" to /boinc/.
    path("projects/<slug:slug>/boinc/", include((protocol_urls.urlpatterns, "project_boinc"))),
    path("lab/", include("scheduling.urls")),
    # the demo project's endpoints, where real clients attached before there were projects
    path("boinc/", include("protocol.urls"), {"slug": Project.DEMO_SLUG}),
]
