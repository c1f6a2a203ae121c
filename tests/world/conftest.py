"""Fixtures for the world's tests: the back end's private data directories and project."""

from tests.backend.conftest import data_dirs, project  # noqa: F401  (fixtures)
