#!/usr/bin/env python
import os
import sys


def unapplied_migrations() -> int:
    """How many of the project's migrations the default database lacks (0 when it cannot tell)."""
    from django.db import DEFAULT_DB_ALIAS, connections
    from django.db.migrations.executor import MigrationExecutor

    connections.close_all()  # the failed statement may have left its transaction aborted
    try:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))
    except Exception:  # the database cannot even be read: let the first error speak
        return 0


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import DatabaseError

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A bad environment variable: say which, without a traceback.
        print(f"boincweb: configuration error: {exc}", file=sys.stderr)
        sys.exit(2)
    except DatabaseError:
        # A command run on a database that `migrate` has not set up (or not brought up to
        # date): say so and how to fix it, rather than "no such table" in a traceback.
        missing = unapplied_migrations()
        if not missing:
            raise
        from django.db import connection

        print(
            f"boincweb: the database {connection.settings_dict['NAME']} is not set up for this "
            f"version: {missing} migration(s) not applied; run `python manage.py migrate` "
            "(`make run` does) and try again",
            file=sys.stderr,
        )
        sys.exit(2)


if __name__ == "__main__":
    main()
