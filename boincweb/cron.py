"""Periodic jobs, loaded by ``manage.py rqcron boincweb.cron`` (the Procfile's ``cron``).

Every daemon makes a pass on the wall clock every 5 seconds, as BOINC's daemons do when
they sleep after a pass that found nothing (reference/server.md §3). Passes may overlap;
each is safe to run twice at once.
"""

from rq import cron

from backend.jobs import run_all_daemons

cron.register(run_all_daemons, "default", interval=5, job_timeout=300)
