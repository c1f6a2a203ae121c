import functools
from collections.abc import Callable
from typing import Any, cast

from django.contrib import admin
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import URLPattern, include, path, register_converter

from backend import urls as backend_urls
from backend import views as backend_views
from backend.converters import ProjectConverter
from backend.models import Project
from boincweb import views
from protocol import urls as protocol_urls

register_converter(ProjectConverter, "project")


def of_demo_project(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """``view`` for the demo project: the old ``/project/...`` paths name no project, and this
    is the one place that picks the demo for them; below it, every page takes its project."""

    @functools.wraps(view)
    def demo_view(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return view(request, *args, project=Project.demo(), **kwargs)

    return demo_view


# backend.urls' pages at the old paths, each for the demo project
demo_patterns = [
    path(str(p.pattern), of_demo_project(p.callback), name=cast(str, p.name))  # each of backend.urls' pages has a name
    for p in backend_urls.urlpatterns
    if isinstance(p, URLPattern)
]


def favicon(request):
    """Browsers ask for /favicon.ico on pages that name no icon (the BOINC master page)."""
    return HttpResponsePermanentRedirect(static("img/favicon.svg"))


urlpatterns = [
    path("", views.home, name="home"),
    path("favicon.ico", favicon),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("accounts/", include("protocol.account_urls")),  # a volunteer's sign-up and My account
    path("accounts/", include("django.contrib.auth.urls")),
    path("project/worlds/", include("world.urls")),
    # the old paths of the one project there was: the demo project's pages
    path("project/", include((demo_patterns, backend_urls.app_name))),
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
