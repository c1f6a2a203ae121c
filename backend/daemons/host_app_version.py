"""Host app versions: the daily quota and reliability record of one host × app version
(reference/server.md §1.9, §3.11).

Who changes what, following BOINC's code (sched/sched_send.cpp, sched_version.cpp,
sched_result.cpp, transitioner.cpp, validator.cpp):

- **send** (scheduler): the row is created the first time a job of the version is sent to the
  host, with ``max_jobs_per_day`` 0, which the host's next request sets to
  ``daily_result_quota`` (sched_send.cpp update_host_app_versions, update_quota); a version
  with no row yet has no daily limit (daily_quota_exceeded); every job sent adds one to
  ``n_jobs_today``, which starts again from 0 on a new UTC day (BOINC resets it when the day of
  the host's last RPC differs from today's; we keep the day in ``jobs_day``, decided from the
  caller's ``now``). A resent lost job is not counted, as in BOINC.
- **quota** (scheduler): no more jobs of a version once ``n_jobs_today`` reaches
  ``max_jobs_per_day`` scaled as BOINC's ``scaled_max_jobs_per_day`` (sched_version.cpp):
  times the host's CPU count for a CPU version, times the GPU count (and ``gpu_multiplier``
  when set) for a GPU version; a limit of 1 (a punished version) is not scaled.
- **success report** (scheduler, ``got_good_result``): ``max_jobs_per_day`` doubles, capped at
  ``daily_result_quota``, if below it; the turnaround (received - sent) enters
  ``turnaround_avg``.
- **error report** (scheduler, ``got_bad_result``, not for EXIT_ABORTED_BY_PROJECT):
  ``max_jobs_per_day = max(min(max_jobs_per_day, quota) - 1, 1)``; ``consecutive_valid = 0``.
- **timeout** (transitioner, ``result_timed_out``): the same decrease (a row still at 0 counts
  as the quota), ``consecutive_valid = 0``, and the workunit's ``delay_bound`` enters
  ``turnaround_avg``.
- **valid** (validator, ``is_valid``): ``max_jobs_per_day + 1`` (uncapped, as in BOINC; a
  later invalid result takes it back down) and ``consecutive_valid + 1`` unless the job was an
  unreplicated one of adaptive replication (``wu.target_nresults == 1 < app.target_nresults``).
- **invalid** (validator, ``is_invalid``): ``consecutive_valid = 0`` and ``max_jobs_per_day - 1``
  if above the quota.

``turnaround_avg`` is BOINC's running average (lib/average.cpp ``AVERAGE::update`` with the
host app version parameters of sched/credit.h): the plain mean of the first 20 samples, then an
exponential average giving each new sample weight 0.01; once there is a sample, a new one is
cut to 10 × the average. BOINC updates it from the validator's credit pass; we update it on each
success report, so it is the turnaround of finished jobs whether or not they validate.

``daily_result_quota = 0`` turns the quota off, as BOINC's ``if (config.daily_result_quota)``
does: nothing is limited and ``max_jobs_per_day`` is left alone.

Anonymous-platform jobs have no AppVersion row (BOINC keys their record by
``1000000 × appid + resource type``); they are skipped, so they have no quota here.

Writes are set-based and safe with several workers: each pass locks the rows it changes with
one ``SELECT ... FOR UPDATE`` in id order, applies its changes in memory in the order they
happened, and writes them in one ``UPDATE ... FROM (VALUES ...)``. Every caller does this last
in its transaction (after its workunit and result rows), so host app version locks are always
taken after the others and in one order, and no two passes can deadlock on them.
"""

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial

from django.db import connection, transaction

from backend.daemons.claim import placeholders, read_rows, update_rows
from backend.models import Host, HostAppVersion

DAY = 86400
# BOINC's parameters for host app version averages (sched/credit.h HAV_AVG_*).
HAV_AVG = (20, 0.01, 10)  # HAV_AVG_THRESH, HAV_AVG_WEIGHT, HAV_AVG_LIMIT
FIELDS = (
    "max_jobs_per_day",
    "n_jobs_today",
    "jobs_day",
    "turnaround_avg",
    "turnaround_n",
    "consecutive_valid",
    "et_avg",
    "et_n",
    "pfc_avg",
    "pfc_n",
)


def check_quota(daily_result_quota: object) -> None:
    """Raise ValueError unless ``daily_result_quota`` is a whole number >= 0."""
    if isinstance(daily_result_quota, bool) or not isinstance(daily_result_quota, int) or daily_result_quota < 0:
        raise ValueError(
            "daily_result_quota must be a whole number of jobs per day, 0 or "
            f"more (0 turns the quota off), not {daily_result_quota!r}"
        )


def utc_day(now: float) -> int:
    return int(now) // DAY


def running_average(
    avg: float, n: float, sample: float, params: tuple[int, float, float] = HAV_AVG
) -> tuple[float, float]:
    """``(avg, n)`` after one more sample (lib/average.h AVERAGE::update with ``params`` =
    (threshold, weight, limit), the host app version's by default; see the module
    docstring): the mean of the first ``threshold`` samples, then an exponential average
    giving a new sample ``weight``; a sample over limit × a non-zero average is cut to it (a
    first sample of 0 must not pin the average at 0 for ever); a negative one is ignored."""
    threshold, weight, limit = params
    if sample < 0:
        return avg, n
    if n and avg and sample > avg * limit:
        sample = avg * limit
    n += 1
    if n < threshold:
        avg += (sample - avg) / n
    else:
        avg += weight * (sample - avg)
    return avg, n


def start_of_request(host: Host, *, quota: int) -> None:
    """sched_send.cpp update_quota, at the start of each request: the host's rows still at
    ``max_jobs_per_day`` 0 get the quota (when there is one)."""
    if quota:
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {connection.ops.quote_name(HostAppVersion._meta.db_table)} SET max_jobs_per_day = %s"
                " WHERE host_id = %s AND max_jobs_per_day = 0",
                [quota, host.pk],
            )


def jobs_today(hav: HostAppVersion, now: float) -> int:
    """Jobs of ``hav``'s version sent to its host on ``now``'s UTC day."""
    return hav.n_jobs_today if hav.jobs_day == utc_day(now) else 0


def scaled_max_jobs_per_day(hav: HostAppVersion, count: int, *, gpu_multiplier: int = 0) -> int:
    """The day's limit for a host with ``count`` CPUs (or GPUs of the version's type), as
    sched_version.cpp scaled_max_jobs_per_day: a limit of 1 is not scaled ("this host
    probably can't use this app version at all"); otherwise times ``count`` when it is
    positive, and times ``gpu_multiplier`` when set (pass it for GPU versions only)."""
    n = hav.max_jobs_per_day
    if n == 1:
        return 1
    if count:
        n *= count
    if gpu_multiplier:
        n *= gpu_multiplier
    return n


# --- the changes, one per event, on a row in memory -----------------------------------------


def sent(hav: HostAppVersion, *, now: float, jobs: int = 1) -> None:
    day = utc_day(now)
    hav.n_jobs_today = (hav.n_jobs_today if hav.jobs_day == day else 0) + jobs
    hav.jobs_day = day


def got_good_result(
    hav: HostAppVersion,
    *,
    quota: int,
    turnaround: float | None,
    job: tuple[float | None, float, float] | None = None,
) -> None:
    """A success report; ``job`` (elapsed_time, flops_estimate, rsc_fpops_est), when given,
    enters the et average (``learn``)."""
    if hav.max_jobs_per_day < quota:
        hav.max_jobs_per_day = min(2 * hav.max_jobs_per_day, quota)
    if turnaround is not None:
        hav.turnaround_avg, hav.turnaround_n = running_average(hav.turnaround_avg, hav.turnaround_n, turnaround)
    if job is not None:
        learn(hav, *job)


def learn(hav: HostAppVersion, elapsed_time: float | None, flops_estimate: float, rsc_fpops_est: float) -> None:
    """Add a successful job to ``hav``'s ``et`` average (elapsed seconds per estimated FLOP)
    with BOINC's host app version averaging; the scheduler's estimate_flops reads it
    (backend.daemons.sched_version). BOINC adds it in the validator's credit pass
    (credit.cpp get_pfc); we add it when the success is reported (docs/server-fidelity.md).
    The ``pfc`` average is the validator's (backend.daemons.credit get_pfc)."""
    if rsc_fpops_est <= 0 or elapsed_time is None or elapsed_time < 0:
        return
    hav.et_avg, hav.et_n = running_average(hav.et_avg, hav.et_n, elapsed_time / rsc_fpops_est)


def got_bad_result(hav: HostAppVersion, *, quota: int) -> None:
    if quota:
        hav.max_jobs_per_day = max(min(hav.max_jobs_per_day, quota) - 1, 1)
    hav.consecutive_valid = 0


def timed_out(hav: HostAppVersion, *, quota: int, delay_bound: float) -> None:
    hav.turnaround_avg, hav.turnaround_n = running_average(hav.turnaround_avg, hav.turnaround_n, delay_bound)
    if quota:
        hav.max_jobs_per_day = max(min(hav.max_jobs_per_day or quota, quota) - 1, 1)
    hav.consecutive_valid = 0


def is_valid(hav: HostAppVersion, *, quota: int, replicated: bool = True) -> None:
    if quota:
        hav.max_jobs_per_day += 1
    if replicated:
        hav.consecutive_valid += 1


def is_invalid(hav: HostAppVersion, *, quota: int) -> None:
    hav.consecutive_valid = 0
    if quota and hav.max_jobs_per_day > quota:
        hav.max_jobs_per_day -= 1


# --- writing -------------------------------------------------------------------------------


def apply(
    changes: Iterable[tuple[int | None, int | None, Callable[[HostAppVersion], object] | None]],
    *,
    create: bool = False,
) -> list[HostAppVersion]:
    """Apply ``changes``, ``(host_id, app_version_id, change)`` tuples in the order they
    happened, where ``change(hav)`` edits a row in memory (three Nones: no change). A row
    that does not exist yet (a job sent before its host had one) is skipped, as the
    scheduler does with a report (sched_result.cpp gavid_to_havp), or with ``create`` made
    with every field 0 first, as the transitioner's and validator's hav_lookup
    (sched/credit.cpp) inserts a cleared record. Returns the rows written. Call inside the
    caller's transaction, after its other writes.
    """
    keyed = [(h, v, change) for h, v, change in changes if h and v and change is not None]
    if not keyed:
        return []
    if create:
        pairs = sorted({(h, v) for h, v, _ in keyed})
        # each record is its host's project's (the host and version are one project's)
        projects = dict(Host.objects.filter(id__in={h for h, _ in pairs}).values_list("id", "project_id"))
        HostAppVersion.objects.bulk_create(
            [HostAppVersion(project_id=projects[h], host_id=h, app_version_id=v) for h, v in pairs if h in projects],
            ignore_conflicts=True,
        )
    # Hosts × versions may take in a few rows no change is for; they are locked, not written.
    rows = locked(sorted({h for h, _, _ in keyed}), sorted({v for _, v, _ in keyed}))
    by_key = {(row.host_id, row.app_version_id): row for row in rows}
    touched = {}
    for host_id, version_id, change in keyed:
        row = by_key.get((host_id, version_id))
        if row is not None:
            change(row)
            touched[row.pk] = row
    update_rows(HostAppVersion, list(touched.values()), FIELDS)
    return list(touched.values())


def locked(host_ids: Sequence[int], version_ids: Sequence[int]) -> list[HostAppVersion]:
    """The rows of hosts ``host_ids`` × versions ``version_ids``, locked in id order (a no-op
    on SQLite, whose transactions are serialised by the write lock), for the caller's
    transaction (one of its own, outside one: no savepoint, which would cost two statements
    and guard nothing)."""
    where = f"t.host_id IN ({placeholders(len(host_ids))}) AND t.app_version_id IN ({placeholders(len(version_ids))})"
    with transaction.atomic(savepoint=False):
        return read_rows(HostAppVersion, where, [*host_ids, *version_ids], lock=True)


def count_sent(
    host: Host, version_jobs: Mapping[int, int], *, now: int, quota: int, known: Collection[int] = ()
) -> list[HostAppVersion]:
    """Count ``version_jobs`` (app version id -> jobs sent now) for ``host``, first creating
    the rows it lacks cleared, ``max_jobs_per_day`` 0 (sched_send.cpp
    update_host_app_versions); the host's next request sets it to the quota
    (``start_of_request``). ``known``: versions the host's rows were read for earlier in the
    request; rows are never deleted, so when every version is known none is created."""
    version_jobs = {v: n for v, n in version_jobs.items() if v and n}
    if not version_jobs:
        return []
    if not version_jobs.keys() <= set(known):
        HostAppVersion.objects.bulk_create(
            [
                HostAppVersion(
                    project_id=host.project_id,
                    host_id=host.pk,
                    app_version_id=v,
                    max_jobs_per_day=0,
                    jobs_day=utc_day(now),
                )
                for v in sorted(version_jobs)
            ],
            ignore_conflicts=True,
        )
    return apply([(host.pk, v, partial(sent, now=now, jobs=n)) for v, n in sorted(version_jobs.items())])
