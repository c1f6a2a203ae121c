"""``{% project_url 'status' %}``: a link to one of the current project's pages.

A page reached under ``/projects/<slug>/`` links to its own project's pages; a page reached
under the old ``/project/`` paths (the demo project's) links to those. ``args`` follow the
page's own (``{% project_url 'workunit_detail' wu.id %}``). A page of another kind about a
project's rows (a world's engine host) names the project as ``boinc_project``.
"""

from typing import Any

from django import template
from django.urls import reverse

from backend.models import Project

register = template.Library()


def project_reverse(request: Any, name: str, *args: Any, project: Project | None = None) -> str:
    """The URL of page ``name`` (backend.urls) of ``project``, by default the project
    ``request`` was made to."""
    project = page_project(request, project)
    if project is not None:
        return reverse(f"projects:{name}", args=[project.slug, *args])
    return reverse(f"project:{name}", args=args)


def page_project(request: Any, project: Project | None = None) -> Project | None:
    """``project``, or the project in the URL ``request`` was made to (None outside
    ``/projects/<slug>/``)."""
    if project is None:
        match = getattr(request, "resolver_match", None)
        project = match.kwargs.get("project") if match is not None else None
    return project if isinstance(project, Project) else None


@register.simple_tag(takes_context=True)
def project_url(context: template.Context, name: str, *args: Any) -> str:
    """A page of the project the page is of; a page outside the project's URLs (a world's)
    names it as ``boinc_project`` in its context."""
    return project_reverse(context.get("request"), name, *args, project=context.get("boinc_project"))


@register.simple_tag(takes_context=True)
def project_master_url(context: template.Context) -> str:
    """The master page of the project the page is of (the demo project's outside any)."""
    project = page_project(context.get("request"), context.get("boinc_project"))
    return (project or Project(slug=Project.DEMO_SLUG)).master_path()


@register.simple_tag(takes_context=True)
def project_prefs_url(context: template.Context) -> str:
    """The volunteer's preferences page (protocol.urls, beside the master page) of the live
    project the page is of; '' for a world's project, which real volunteers do not join."""
    project = page_project(context.get("request"), context.get("boinc_project")) or Project(slug=Project.DEMO_SLUG)
    return f"{project.master_path()}prefs/" if project.is_live else ""
