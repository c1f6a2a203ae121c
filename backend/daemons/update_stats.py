"""BOINC's update_stats task (sched/update_stats.cpp; reference/server.md §3.8's credit): the
recent average credit of those who earn nothing decays.

The validator moves an average (``expavg_credit``, half-life 7 days) only when it grants
credit, so a host, user or team that stopped computing would keep its last RAC for ever. BOINC
runs update_stats as a project task (make_project's, once a day), and its web pages show the
stored values; each run brings every average not updated for a day (``MIN_AGE``) to ``now``
with ``update_average(now, 0, 0, ...)``: the average × 2^(-(now - expavg_time) / half-life),
``expavg_time = now``. Which rows, as update_stats selects them:

- users and hosts whose average is above 0.1;
- app versions whose average is above 0;
- every team (BOINC's loop also recounts its members), the average of one never credited
  (``expavg_time`` 0) then staying 0 with its time set to ``now``.

Here it is a daemon pass like the others (``run_once``), run in each round: a row is decayed
at most once a day whatever the rounds' interval, and decaying in several steps gives the
same value as in one (2^-a × 2^-b = 2^-(a+b)). The rows are locked while they are decayed,
so a grant the validator makes meanwhile waits and then adds to the decayed average. BOINC's
PHP decays a
host or team the same way when a page asks whether it has been inactive for n days
(html/inc/host.inc host_inactive_ndays, team.inc team_inactive_ndays).
"""

from django.db import transaction
from django.db.models import QuerySet

from backend.daemons.claim import shard, update_rows
from backend.daemons.credit import CREDIT_HALF_LIFE, update_average
from backend.models import AppVersion, Host, Project, Team, UserCredit

# update_stats.cpp MIN_AGE: averages updated within a day are left alone.
MIN_AGE = 86400
# (model, the least average decayed: update_stats.cpp's "expavg_credit>0.1" and so on)
TABLES = ((UserCredit, 0.1), (Host, 0.1), (AppVersion, 0.0), (Team, None))


def run_once(*, project: Project, now: int, batch_size: int, mod: int = 1, index: int = 0) -> int:
    """Decay at most ``batch_size`` stale averages of each of ``project``'s tables; returns
    how many were written."""
    return sum(
        decay(model, least, project=project, now=now, batch_size=batch_size, mod=mod, index=index)
        for model, least in TABLES
    )


def decayed(avg: float, avg_time: float, now: int) -> tuple[float, float]:
    """``(expavg_credit, expavg_time)`` brought to ``now`` with no new credit."""
    return update_average(now, 0, 0, avg, avg_time, CREDIT_HALF_LIFE)


def decay(
    model: type[UserCredit | Host | AppVersion | Team],
    least: float | None,
    *,
    project: Project,
    now: int,
    batch_size: int,
    mod: int = 1,
    index: int = 0,
) -> int:
    """Decay the stale rows of ``model`` (those over ``least``; None: all), locked in id order
    as the validator's credit writes lock them, and written in one statement."""
    stale: QuerySet[UserCredit | Host | AppVersion | Team] = model.objects.filter(
        project=project, expavg_time__lt=now - MIN_AGE
    )
    if least is not None:
        stale = stale.filter(expavg_credit__gt=least)
    pk = model._meta.pk.attname
    with transaction.atomic():
        rows = list(
            shard(stale, mod, index, field=pk)
            .select_for_update(no_key=True)
            .only(pk, "expavg_credit", "expavg_time")
            .order_by(pk)[:batch_size]
        )
        for row in rows:
            row.expavg_credit, row.expavg_time = decayed(row.expavg_credit, row.expavg_time, now)
        update_rows(model, rows, ["expavg_credit", "expavg_time"])
    return len(rows)
