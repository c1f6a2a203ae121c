"""Running the project's own commands as child processes against the test run's database and
Redis (the tests that start gunicorn or attach_client)."""

import os
import sys
from pathlib import Path

from django.conf import settings
from django.db import connection

BASE = Path(__file__).resolve().parent.parent.parent
MANAGE = [sys.executable, str(BASE / "manage.py")]


def database_url():
    """The URL of the test database (which a transactional test's rows reach)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def child_env(**values):
    """This environment without pytest's and Django's test variables, on the test database and
    the test run's Redis, with this process's SECRET_KEY (a development key is fresh in each
    process, and a result's ``random`` is drawn from it: backend.models.name_random), with
    ``values`` on top."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("DJANGO_", "PYTEST"))}
    env.update(DATABASE_URL=database_url(), REDIS_URL=settings.REDIS_URL, SECRET_KEY=settings.SECRET_KEY)
    env.update({key: str(value) for key, value in values.items()})
    return env


def deployed_command(process):
    """The command line of ``process`` in Procfile.deploy (docs/deploy.md), run with ``sh -c``
    as honcho and most service managers do."""
    for line in (BASE / "Procfile.deploy").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == process:
            return ["sh", "-c", "exec " + command.strip()]
    raise LookupError(f"no {process} in Procfile.deploy")
