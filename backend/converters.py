"""The ``<project:...>`` path converter: a project's slug in a URL, the Project in the view.

An unknown slug matches no URL, so it is a 404 before any view runs.
"""

from backend.models import Project


class ProjectConverter:
    regex = "[-a-zA-Z0-9_]+"

    def to_python(self, value: str) -> Project:
        project = Project.objects.filter(slug=value).first()
        if project is None:
            raise ValueError(f"no project {value!r}")
        return project

    def to_url(self, value: Project | str) -> str:
        return value.slug if isinstance(value, Project) else str(value)
