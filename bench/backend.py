"""The server pipeline's throughput: ``python bench/backend.py [--results N]``.

Migrates the configured database (DATABASE_URL; PostgreSQL is the one the target is set for)
and runs ``manage.py bench_backend --json``, printing its JSON: results, completed, seconds,
results_per_second and per_daemon_seconds.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "boincweb.settings")


def main(argv):
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    call_command("bench_backend", "--json", *argv)


if __name__ == "__main__":
    main(sys.argv[1:])
