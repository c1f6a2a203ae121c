"""The validator (reference/server.md §3.7: sched/validator.cpp, validate_util2.cpp).

A pass claims workunits with ``need_validate`` (row locks, SKIP LOCKED on PostgreSQL), reads
all their results and output files in two queries, and decides each workunit in memory.

The comparison is pluggable per app (``App.validator``), in validate_util2's shape: an
``init_result(result, files, app)`` that reads a result's outputs into something comparable, and
a ``compare(a, b, app)``. Both may raise ``TransientError`` (try again later) or
``PermanentError`` (the output is unusable: outcome VALIDATE_ERROR). Built in:

- ``bitwise`` (default, sample_bitwise_validator): the outputs' MD5 checksums are equal;
- ``numeric``: the outputs hold the same count of numbers, equal within ``App.validate_tolerance``
  (relative and absolute).

``register(name, init_result, compare)`` adds another.

Rules, following BOINC's code (§4):

- **with a canonical result** (late results): each SUCCESS result INIT or INCONCLUSIVE is
  compared with the canonical one: VALID (credit granted) or INVALID; unreadable output ->
  VALIDATE_ERROR; transition_time = now once one was compared;
- **without**: the viable results (SUCCESS, not INVALID) are checked once there are min_quorum
  of them. Consensus is a majority of the *quorum size*: the first result (in id order) that
  matches at least ``min_quorum // 2 + 1`` results (itself included) is canonical; every result
  then is VALID if it matched it, else INVALID; ``canonical_resultid``, ``canonical_credit``,
  assimilate_state READY, UNSENT results -> OVER/DIDNT_NEED (an event for server_state and
  one for outcome; INACTIVE ones are left to the transitioner, as validator.cpp does), and
  transition_time = INT_MAX (the assimilator sets it to now when done; BOINC does so "to
  avoid a race");
- **no consensus**: the results checked become INCONCLUSIVE; more viable results than
  max_success_results -> WU_ERROR_TOO_MANY_SUCCESS_RESULTS; and (independently, as in
  validator.cpp) once there are target_nresults of them, target_nresults = n_viable + 1 so the
  transitioner makes one more replica; transition_time = now;
- "transition_time = now" (BOINC's IMMEDIATE) is ``min(transition_time, now)`` here, with
  ``keep_due_workunits`` (on by default): a workunit already due (say, a result past its
  deadline not yet timed out) stays due, instead of being postponed to ``now``, which a
  transitioner pass at the same ``now`` would skip; off, ``now`` is written as in BOINC;
- **transient errors**: need_validate is cleared anyway and transition_time becomes at most
  now + 6 h; the result stays INIT, so the transitioner sets need_validate again. (BOINC's
  check_set path turns such a result INCONCLUSIVE, after which it may never be checked; we keep
  it INIT, the intended behaviour.)
- **host app versions** (``backend.daemons.host_app_version``): a result turned VALID raises its
  host app version's max_jobs_per_day by one and, unless it was an unreplicated job of adaptive
  replication, its consecutive_valid (BOINC's ``is_valid``); one turned INVALID (including a
  validate error) resets consecutive_valid and lowers max_jobs_per_day by one if it is above
  the quota (``is_invalid``). Written at the end of the pass, in one locked read and one
  write, before the hosts' credit;
- **every write is a compare-and-set** from the state the pass read: the rows still in that
  state are locked and changed, and only they get events, credit and host app version changes
  (a pass that read a result another pass has since validated leaves it alone);
- **credit** is granted once per result, when it becomes VALID: CreditNew by default, or as
  the options ``credit_from_wu``, ``credit_from_runtime``, ``no_credit`` and
  ``max_granted_credit`` say (``backend.daemons.credit``, which also keeps the host app
  versions' and app versions' PFC averages). A result validated against an existing canonical
  result gets the canonical result's granted credit. As credit.cpp grant_credit does, the
  host, its owner's credit row in the project (``UserCredit``: BOINC's user row, one per
  project, made on the owner's first credit there) and the owner's team each get it in ``total_credit`` and in
  the recent average ``expavg_credit`` (lib/util.cpp update_average, a 7-day half-life, the
  work taken as done since the result was sent); with ``credit_by_app``, the user's and team's
  credit from the app too (grant_credit_by_app); and the day's ``CreditHistory`` row of the
  user and team keeps their figures for charts. As validator.cpp is_valid does, the host's
  ``avg_turnaround`` takes the result's turnaround (received - sent) with weight 0.3
  (sched_util.cpp compute_avg_turnaround; the first sample is taken whole), with or without
  credit.
"""

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import SimpleNamespace
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from backend.daemons import credit as credit_rules
from backend.daemons import host_app_version
from backend.daemons.claim import claim, update_rows
from backend.daemons.hierarchy import upload_path
from backend.daemons.sched_types import DAILY_RESULT_QUOTA
from backend.events import Event, event, record
from backend.models import (
    INT_MAX,
    App,
    AppVersion,
    AssimilateState,
    CreditHistory,
    ErrorMask,
    File,
    Host,
    HostAppVersion,
    Outcome,
    Project,
    Result,
    ServerState,
    Team,
    TeamAppCredit,
    UserAppCredit,
    UserCredit,
    ValidateState,
    Workunit,
)

ACTOR = "validator"
COBBLESTONE_SCALE = credit_rules.COBBLESTONE_SCALE
MAX_GRANTED_CREDIT = credit_rules.MAX_GRANTED_CREDIT
RETRY_DELAY = 6 * 3600
DAY = 86400
CREDIT_HALF_LIFE = credit_rules.CREDIT_HALF_LIFE
NUMBER = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:inf|nan)", re.I)


class TransientError(Exception):
    """The output can't be read now (say, the upload directory is away): retry later."""


class PermanentError(Exception):
    """The output is unusable: the result gets outcome VALIDATE_ERROR."""


def bitwise_init(result: Result, files: Sequence[File], app: App) -> tuple[str, ...]:
    if not files:
        raise PermanentError("no output files")
    return tuple(f.md5_cksum for f in files)


def bitwise_compare(a: object, b: object, app: App) -> bool:
    return a == b


def numeric_init(result: Result, files: Sequence[File], app: App) -> list[float]:
    if not files:
        raise PermanentError("no output files")
    numbers: list[float] = []
    for f in files:
        path = upload_path(app.project, f.name)
        if not path.parent.is_dir():
            raise TransientError(f"upload directory {path.parent} is missing")
        try:
            numbers.extend(float(token) for token in NUMBER.findall(path.read_bytes()))
        except FileNotFoundError:
            raise PermanentError(f"output {f.name} is missing") from None
    return numbers


def numeric_compare(a: Sequence[float], b: Sequence[float], app: App) -> bool:
    tol = app.validate_tolerance
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=tol, abs_tol=tol) or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b)
    )


# What an init_result returns is its comparison's own (checksums, numbers), passed back to its
# compare.
InitResult = Callable[[Result, Sequence[File], App], Any]
Compare = Callable[[Any, Any, App], bool]

COMPARISONS: dict[str, tuple[InitResult, Compare]] = {
    "bitwise": (bitwise_init, bitwise_compare),
    "numeric": (numeric_init, numeric_compare),
}


def register(name: str, init_result: InitResult, compare: Compare) -> None:
    """Make ``App.validator = name`` use these two functions."""
    COMPARISONS[name] = (init_result, compare)


def credit_for(wu: Workunit) -> float:
    """The workunit's estimated credit (credit.cpp wu_estimated_credit with min_avg_pfc 1),
    capped at MAX_GRANTED_CREDIT: what CreditNew grants results that give it nothing to go
    on, and what a work generator may store as ``canonical_credit`` for credit_from_wu."""
    return min(wu.rsc_fpops_est * COBBLESTONE_SCALE, MAX_GRANTED_CREDIT)


@dataclass
class Changes:
    now: int
    project_id: int
    daily_result_quota: int = DAILY_RESULT_QUOTA
    keep_due: bool = True
    # (host, app version) of each result whose host app version BOINC's validator looks up
    # (hav_lookup creates a missing record): every viable result, or, with a canonical
    # result, each one compared with it
    looked_up: list[tuple[int | None, int | None]] = field(default_factory=list)
    validate_states: dict[Result, tuple[int, int]] = field(default_factory=dict)  # result -> (old, new)
    validate_errors: list[Result] = field(default_factory=list)
    didnt_need: list[Result] = field(default_factory=list)
    credit: dict[int, float | None] = field(default_factory=dict)  # result id -> credit (None: none)
    workunits: list[Workunit] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    credit_options: credit_rules.CreditOptions = field(default_factory=credit_rules.CreditOptions)
    credit_by_app: bool = False
    # departure 10's option: of one workunit's results checked together, only the last one's
    # host app version change is kept, as BOINC's validator writes each one's copy whole
    hav_last_copy_wins: bool = False
    checked_together: dict[int, int] = field(default_factory=dict)  # result id -> workunit id
    # CreditNew's state for the pass: app versions as read at its start (BOINC's validator
    # caches them), host app versions' PFC averages as this pass leaves them, the app
    # versions' samples, and the host app version PFC averages to write, in order
    versions: dict[int | None, AppVersion] = field(default_factory=dict)
    havs: dict[tuple[int | None, int | None], credit_rules.HavPfc] = field(
        default_factory=dict
    )  # (host, version) -> HavPfc
    samples: credit_rules.Samples = field(default_factory=credit_rules.Samples)
    hav_pfc: list[tuple[int | None, int | None, float, float]] = field(
        default_factory=list
    )  # (host, version, pfc_n, pfc_avg)

    def hav(self, result: Result) -> credit_rules.HavPfc | None:
        """A copy of the result's host app version PFC state (hav_lookup), or None."""
        if not result.host_id or not result.app_version_id:
            return None
        found = self.havs.get((result.host_id, result.app_version_id))
        base = found or credit_rules.HavPfc()
        return credit_rules.HavPfc(base.pfc_n, base.pfc_avg, base.consecutive_valid)

    def keep_hav(self, result: Result, hav: credit_rules.HavPfc | None) -> None:
        """Make ``hav`` the result's host app version PFC state from now on (BOINC writes each
        validated result's copy whole: of two copies of one record, the later one wins)."""
        if hav is None:
            return
        key = (result.host_id, result.app_version_id)
        self.havs[key] = hav
        self.hav_pfc.append((*key, hav.pfc_n, hav.pfc_avg))

    def granted(self, credit: float) -> float | None:
        return None if self.credit_options.no_credit else credit

    def set_state(self, result: Result, new: int) -> None:
        if result.validate_state != new:
            self.validate_states[result] = (result.validate_state, new)
            result.validate_state = new


class Checker:
    """init_result with caching, so each result's output is read once per pass."""

    def __init__(self, app: App, files: Mapping[int | None, Sequence[File]]) -> None:
        self.app = app
        self.init, self.compare_fn = COMPARISONS[app.validator]
        self.files = files
        self.cache: dict[int, Any] = {}

    def read(self, result: Result) -> Any:
        if result.pk not in self.cache:
            self.cache[result.pk] = self.init(result, self.files.get(result.pk, []), self.app)
        return self.cache[result.pk]

    def compare(self, a: Result, b: Result) -> bool:
        return self.compare_fn(self.read(a), self.read(b), self.app)


def immediate(wu: Workunit, changes: Changes) -> None:
    """validator.cpp's IMMEDIATE: transition_time = now (min(transition_time, now) with
    ``keep_due``, so a workunit already due is not postponed)."""
    now = changes.now
    wu.transition_time = min(wu.transition_time, now) if changes.keep_due else now


def handle_wu(wu: Workunit, results: Sequence[Result], checker: Checker, changes: Changes) -> None:
    """Validate one workunit (§3.7); returns nothing, records everything in ``changes``."""
    now = changes.now
    wu.need_validate = False
    canonical = next((r for r in results if r.pk == wu.canonical_result_id), None)
    if wu.canonical_result_id:
        tested = len(changes.looked_up)
        retry = check_against_canonical(wu, results, canonical, checker, changes)
        if retry:
            wu.transition_time = min(wu.transition_time, now + RETRY_DELAY)
        elif len(changes.looked_up) > tested:
            immediate(wu, changes)  # validator.cpp: only once a result was compared
        return
    viable = [r for r in results if r.outcome == Outcome.SUCCESS and r.validate_state != ValidateState.INVALID]
    changes.looked_up.extend((r.host_id, r.app_version_id) for r in viable)
    changes.checked_together.update((r.pk, wu.pk) for r in viable)
    if len(viable) < wu.min_quorum:
        return
    good, retry = [], False
    for r in viable:
        try:
            checker.read(r)
            good.append(r)
        except TransientError:
            retry = True
        except PermanentError:
            changes.validate_errors.append(r)
            changes.set_state(r, ValidateState.INVALID)
    try:
        chosen = consensus(good, wu.min_quorum, checker)
    except TransientError:
        chosen, good, retry = None, [], True
    if chosen is not None:
        canonical_id, matching = chosen
        wu.canonical_result_id = canonical_id
        copies = {r.pk: changes.hav(r) for r in good}  # each as read before any is written
        valid = [(r, changes.versions.get(r.app_version_id), copies[r.pk]) for r in good if r.pk in matching]
        wu.canonical_credit, _ = credit_rules.canonical_credit(
            wu, wu.app, viable, valid, changes.credit_options, changes.samples
        )
        for r in good:
            copy = copies[r.pk]
            if r.pk in matching:
                changes.keep_hav(r, copy)
            elif changes.hav_last_copy_wins and copy is not None and copy.consecutive_valid > 0:
                # departure 10 under its option: is_invalid ends the run of valid results, so
                # BOINC writes this copy whole, its PFC average as read, over an earlier valid
                # copy's (seed 9606's validator case 218)
                changes.keep_hav(r, copy)
        for r in good:
            if r.pk in matching:
                changes.set_state(r, ValidateState.VALID)
                changes.credit[r.pk] = changes.granted(wu.canonical_credit)
            else:
                changes.set_state(r, ValidateState.INVALID)
        if wu.assimilate_state == AssimilateState.INIT:
            wu.assimilate_state = AssimilateState.READY
        # UNSENT only, as validator.cpp handle_wu: an INACTIVE result is the transitioner's
        # (it ends those and the unsent ones once the workunit is assimilated, §3.2)
        changes.didnt_need.extend(r for r in results if r.server_state == ServerState.UNSENT)
        wu.transition_time = INT_MAX
        return
    for r in good:
        if r.validate_state == ValidateState.INIT:
            changes.set_state(r, ValidateState.INCONCLUSIVE)
    n_viable = len(good) + sum(1 for r in viable if r not in good and r not in changes.validate_errors)
    # validator.cpp: the two checks are independent; too many successes sets the error and
    # still raises target_nresults.
    if n_viable > wu.max_success_results:
        wu.error_mask |= ErrorMask.TOO_MANY_SUCCESS_RESULTS
        immediate(wu, changes)
    if n_viable >= wu.target_nresults and good:
        wu.target_nresults = n_viable + 1
        immediate(wu, changes)
    if changes.validate_errors:
        immediate(wu, changes)
    if retry:
        wu.transition_time = min(wu.transition_time, now + RETRY_DELAY)


def consensus(good: Sequence[Result], min_quorum: int, checker: Checker) -> tuple[int, set[int]] | None:
    """(canonical id, ids matching it) for the first result a quorum majority agrees on."""
    if len(good) < min_quorum:
        return None
    min_valid = min_quorum // 2 + 1
    for candidate in good:
        matching = {r.pk for r in good if r is candidate or checker.compare(candidate, r)}
        if len(matching) >= min_valid:
            return candidate.pk, matching
    return None


def check_against_canonical(
    wu: Workunit, results: Sequence[Result], canonical: Result | None, checker: Checker, changes: Changes
) -> bool:
    """Late results against the canonical one (check_pair); returns whether to retry."""
    for r in results:
        if (
            r is canonical
            or r.outcome != Outcome.SUCCESS
            or r.validate_state not in (ValidateState.INIT, ValidateState.INCONCLUSIVE)
        ):
            continue
        changes.looked_up.append((r.host_id, r.app_version_id))
        try:
            checker.read(r)
        except TransientError:
            return True
        except PermanentError:
            changes.validate_errors.append(r)
            changes.set_state(r, ValidateState.INVALID)
            continue
        try:
            match = canonical is not None and checker.compare(canonical, r)
        except TransientError:
            return True
        except PermanentError:
            match = False
        if match:
            assert canonical is not None  # a match is with the canonical result
            changes.set_state(r, ValidateState.VALID)
            # validator.cpp: is_valid first, then CreditNew's statistics for this result alone;
            # the credit is the canonical result's
            hav = changes.hav(r)
            if hav is not None and not (wu.target_nresults == 1 and wu.app.target_nresults > 1):
                hav.consecutive_valid += 1
            credit_rules.assign_credit_set(
                wu, wu.app, [(r, changes.versions.get(r.app_version_id), hav)], changes.credit_options, changes.samples
            )
            changes.keep_hav(r, hav)
            changes.credit[r.pk] = changes.granted(canonical.granted_credit)
        else:
            changes.set_state(r, ValidateState.INVALID)
    return False


def locked_ids(queryset: QuerySet[Result] | QuerySet[Host]) -> set[int]:
    """The ids of the rows still matching ``queryset`` (a compare-and-set's precondition),
    locked until the pass commits (on PostgreSQL; SQLite's pass holds the write lock): the
    rows an update with the same filter will change, so that only their changes are credited
    and recorded. The lock is the one the update takes (FOR NO KEY UPDATE), which does not
    wait for another transaction merely referring to the row, say a scheduler sending a
    result to the host."""
    return set(queryset.select_for_update(no_key=True).order_by("id").values_list("id", flat=True))


def apply(changes: Changes, wus: Sequence[Workunit]) -> None:
    """Write a pass's changes, each a compare-and-set from the state read; a row someone else
    changed meanwhile is left alone, and gets no event, credit or quota change."""
    now = changes.now
    by_transition: dict[tuple[Any, Any], list[Result]] = {}
    for result, (old, new) in changes.validate_states.items():
        by_transition.setdefault((old, new), []).append(result)
    for (old, new), results in by_transition.items():
        ids = locked_ids(Result.objects.filter(id__in=[r.pk for r in results], validate_state=old))
        stale = [r for r in results if r.pk not in ids]
        for r in stale:
            del changes.validate_states[r]
            changes.credit.pop(r.pk, None)
        results = [r for r in results if r.pk in ids]
        if new == ValidateState.VALID:
            by_credit: dict[float | None, list[int]] = {}
            for r in results:
                by_credit.setdefault(changes.credit[r.pk], []).append(r.pk)
            for credit, pks in by_credit.items():
                # a result is credited only on its way to VALID (no_credit: left as it is)
                granted = {} if credit is None else {"granted_credit": credit}
                Result.objects.filter(id__in=pks, validate_state=old).update(validate_state=new, **granted)
        elif results:
            Result.objects.filter(id__in=[r.pk for r in results], validate_state=old).update(validate_state=new)
        for r in results:
            reason = {
                ValidateState.VALID: f"matches the canonical result; credit {changes.credit.get(r.pk) or 0:.2f}",
                ValidateState.INVALID: "does not match the canonical result",
                ValidateState.INCONCLUSIVE: "no consensus yet",
            }.get(new, "")
            if r in changes.validate_errors:
                reason = "output unusable"
            changes.events.append(
                event(
                    time=now,
                    actor=ACTOR,
                    result_id=r.pk,
                    workunit_id=r.workunit_id,
                    field="validate_state",
                    old=old,
                    new=new,
                    reason=reason,
                )
            )
    if changes.validate_errors:
        ids = locked_ids(Result.objects.filter(id__in=[r.pk for r in changes.validate_errors], outcome=Outcome.SUCCESS))
        Result.objects.filter(id__in=ids, outcome=Outcome.SUCCESS).update(outcome=Outcome.VALIDATE_ERROR)
        for r in changes.validate_errors:
            if r.pk in ids:
                changes.events.append(
                    event(
                        time=now,
                        actor=ACTOR,
                        result_id=r.pk,
                        workunit_id=r.workunit_id,
                        field="outcome",
                        old=Outcome.SUCCESS,
                        new=Outcome.VALIDATE_ERROR,
                        reason="output unusable",
                    )
                )
    if changes.didnt_need:
        ids = locked_ids(
            Result.objects.filter(id__in=[r.pk for r in changes.didnt_need], server_state=ServerState.UNSENT)
        )
        Result.objects.filter(id__in=ids, server_state=ServerState.UNSENT).update(
            server_state=ServerState.OVER, outcome=Outcome.DIDNT_NEED
        )
        for r in changes.didnt_need:
            if r.pk not in ids:
                continue
            for name, old, new in (
                ("server_state", r.server_state, ServerState.OVER),
                ("outcome", Outcome.INIT, Outcome.DIDNT_NEED),
            ):
                changes.events.append(
                    event(
                        time=now,
                        actor=ACTOR,
                        result_id=r.pk,
                        workunit_id=r.workunit_id,
                        field=name,
                        old=old,
                        new=new,
                        reason="canonical result found",
                    )
                )
    update_rows(
        Workunit,
        wus,
        [
            "need_validate",
            "canonical_result",
            "canonical_credit",
            "assimilate_state",
            "error_mask",
            "target_nresults",
            "transition_time",
        ],
    )
    record(changes.events, changes.project_id)
    # Locks are taken in the order every pass and scheduler request takes them: workunits,
    # results, host app versions, hosts.
    host_app_version.apply(
        [
            *((h, v, noop) for h, v in changes.looked_up),
            *quota_changes(changes, wus),
            *((h, v, partial(set_pfc, n=n, avg=avg)) for h, v, n, avg in changes.hav_pfc),
        ],
        create=True,
    )
    grant_host_credit(changes)
    credit_rules.write_app_versions(changes.samples, now, CREDIT_HALF_LIFE)


def set_pfc(hav: HostAppVersion, *, n: float, avg: float) -> None:
    """A host app version's PFC average as CreditNew left it (DB_HOST_APP_VERSION
    update_validator writes it whole)."""
    hav.pfc_n, hav.pfc_avg = n, avg


def noop(hav: HostAppVersion) -> None:
    """A host app version looked up and left as it is."""


def quota_changes(
    changes: Changes, wus: Iterable[Workunit]
) -> list[tuple[int | None, int | None, Callable[[HostAppVersion], None]]]:
    """The host app version changes of the results validated in this pass, in order."""
    quota = changes.daily_result_quota
    by_id = {wu.pk: wu for wu in wus}
    found: list[tuple[int | None, int | None, Callable[[HostAppVersion], None]]] = []
    last = {}
    if changes.hav_last_copy_wins:
        # DB_HOST_APP_VERSION::update_validator writes a copy only where it differs from the
        # record as read (all copies are read before any is written): the last copy that
        # changes something wins, and an INVALID that leaves the record as it was (no run of
        # valid results to end, a quota at or under the project's) writes nothing
        untouched = unchanged_by_invalid(changes, quota)
        for result, (_, new) in changes.validate_states.items():
            if new in (ValidateState.VALID, ValidateState.INVALID) and result.pk in changes.checked_together:
                if new == ValidateState.INVALID and (result.host_id, result.app_version_id) in untouched:
                    continue
                last[(result.workunit_id, result.host_id, result.app_version_id)] = result.pk
    for result, (_, new) in changes.validate_states.items():
        copy = (result.workunit_id, result.host_id, result.app_version_id)
        if copy in last and last[copy] != result.pk:
            continue  # an earlier copy, replaced by the last one's write
        if new == ValidateState.VALID:
            wu = by_id[result.workunit_id]
            unreplicated = wu.target_nresults == 1 and wu.app.target_nresults > 1
            change = partial(host_app_version.is_valid, quota=quota, replicated=not unreplicated)
        elif new == ValidateState.INVALID:
            change = partial(host_app_version.is_invalid, quota=quota)
        else:
            continue
        found.append((result.host_id, result.app_version_id, change))
    return found


def unchanged_by_invalid(changes: Changes, quota: int) -> set[tuple[int | None, int | None]]:
    """The (host, app version) records of this pass's INVALID results that is_invalid would
    leave as they are (a record not yet made is made cleared, as hav_lookup inserts it)."""
    keys = {
        (r.host_id, r.app_version_id)
        for r, (_, new) in changes.validate_states.items()
        if new == ValidateState.INVALID and r.host_id and r.app_version_id
    }
    if not keys:
        return set()
    rows = {
        (h, v): (valid, per_day)
        for h, v, valid, per_day in HostAppVersion.objects.filter(
            host_id__in={h for h, _ in keys}, app_version_id__in={v for _, v in keys}
        ).values_list("host_id", "app_version_id", "consecutive_valid", "max_jobs_per_day")
    }
    return {key for key in keys if rows.get(key, (0, 0))[0] == 0 and not (quota and rows.get(key, (0, 0))[1] > quota)}


update_average = credit_rules.update_average


def avg_turnaround(avg: float, turnaround: float) -> float:
    """sched_util.cpp compute_avg_turnaround."""
    return turnaround if avg == 0 else 0.7 * avg + 0.3 * turnaround


def grant_host_credit(changes: Changes) -> None:
    """Grant the credit of the results this pass turned VALID (``changes.credit`` holds only
    those: ``apply`` drops the ones it did not change) to their hosts, the hosts' owners and
    the owners' teams, and take each one's turnaround into its host's average, one result at
    a time in id order (credit.cpp grant_credit, validator.cpp is_valid); with no_credit
    (credit None) only the turnaround."""
    if not changes.credit:
        return
    now = changes.now
    rows = list(
        Result.objects.filter(id__in=list(changes.credit), host__isnull=False)
        .order_by("id")
        .values_list("id", "host_id", "sent_time", "received_time", "app_id")
    )
    if not rows:
        return
    # in id order, as every validator pass locks hosts, so that two passes never deadlock
    locked_ids(Host.objects.filter(id__in={row[1] for row in rows}))
    hosts = Host.objects.in_bulk({row[1] for row in rows})
    owners = {host.owner_id for host in hosts.values()}
    UserCredit.objects.bulk_create(
        [UserCredit(user_id=u, project_id=changes.project_id) for u in sorted(owners)], ignore_conflicts=True
    )
    # the owners' rows in this project (BOINC's user rows are the project's own), locked in id
    # order as update_stats locks them
    users = {
        u.user_id: u
        for u in UserCredit.objects.select_for_update(no_key=True)
        .filter(project_id=changes.project_id, user_id__in=owners)
        .order_by("id")
    }
    team_ids = {u.team_id for u in users.values() if u.team_id}
    teams: dict[int | None, Team]
    teams = {
        t.pk: t
        for t in Team.objects.select_for_update(no_key=True)
        .filter(project_id=changes.project_id, id__in=team_ids)
        .order_by("id")
    }
    by_app = []
    for result_id, host_id, sent_time, received_time, app_id in rows:
        credit = changes.credit[result_id]
        host = hosts[host_id]
        host.avg_turnaround = avg_turnaround(host.avg_turnaround, received_time - sent_time)
        if credit is None:
            continue
        user = users[host.owner_id]
        for row in (host, user, teams.get(user.team_id)):
            if row is None:
                continue
            row.expavg_credit, row.expavg_time = update_average(
                now, sent_time, credit, row.expavg_credit, row.expavg_time
            )
            row.total_credit += credit
        by_app.append((user.user_id, user.team_id, app_id, sent_time, credit))
    fields = ("total_credit", "expavg_credit", "expavg_time")
    update_rows(Host, list(hosts.values()), (*fields, "avg_turnaround"))
    credited_users = [users[u] for u in sorted({row[0] for row in by_app})]
    credited_teams = [teams[t] for t in sorted({row[1] for row in by_app if row[1]})]
    update_rows(UserCredit, credited_users, fields)
    update_rows(Team, credited_teams, fields)
    if changes.credit_by_app:
        grant_credit_by_app(by_app, now, changes.project_id)
    record_history(credited_users, credited_teams, now, changes.project_id)


def grant_credit_by_app(granted: Sequence[tuple[int, int | None, int, int, float]], now: int, project_id: int) -> None:
    """The users' and teams' credit per app (credit.cpp grant_credit_by_app): ``granted`` is
    ``[(user, team, app, sent_time, credit)]`` in the order granted. A new row's average
    starts at now, as BOINC inserts it with expavg_time = now."""
    model: Any  # UserAppCredit, then TeamAppCredit: bulk_create takes rows of one model
    for model, key, index in ((UserAppCredit, "user_id", 0), (TeamAppCredit, "team_id", 1)):
        pairs = sorted({(row[index], row[2]) for row in granted if row[index]})
        if not pairs:
            continue
        model.objects.bulk_create(
            [model(**{key: owner}, app_id=app, expavg_time=now, project_id=project_id) for owner, app in pairs],
            ignore_conflicts=True,
        )
        rows = {
            (getattr(r, key), r.app_id): r
            for r in model.objects.select_for_update(no_key=True)
            .filter(project_id=project_id, **{f"{key}__in": {o for o, _ in pairs}}, app_id__in={a for _, a in pairs})
            .order_by("id")
        }
        for row in granted:
            target = rows.get((row[index], row[2]))
            if target is None:
                continue
            target.expavg, target.expavg_time = update_average(now, row[3], row[4], target.expavg, target.expavg_time)
            target.total += row[4]
            target.njobs += 1
        update_rows(model, list(rows.values()), ("njobs", "total", "expavg", "expavg_time"))


def record_history(users: Iterable[UserCredit], teams: Iterable[Team], now: int, project_id: int) -> None:
    """Keep the day's CreditHistory row of each user and team just credited: their figures
    in the project as this pass leaves them (one row per project, owner and UTC day,
    overwritten by later passes; a user's owner_id is the user's id)."""
    day = int(now) // DAY
    rows = [
        CreditHistory(
            project_id=project_id,
            kind=kind,
            owner_id=owner.user_id if isinstance(owner, UserCredit) else owner.pk,
            day=day,
            total_credit=owner.total_credit,
            expavg_credit=owner.expavg_credit,
            expavg_time=owner.expavg_time,
        )
        for kind, owners in ((CreditHistory.Kind.USER, users), (CreditHistory.Kind.TEAM, teams))
        for owner in owners
    ]
    if rows:
        CreditHistory.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["project", "kind", "owner_id", "day"],
            update_fields=["total_credit", "expavg_credit", "expavg_time"],
        )


def read_credit_state(changes: Changes, results: Sequence[Result]) -> None:
    """The app versions and host app version PFC averages CreditNew reads in this pass."""
    changes.versions = AppVersion.objects.in_bulk({r.app_version_id for r in results if r.app_version_id})
    pairs = {(r.host_id, r.app_version_id) for r in results if r.host_id and r.app_version_id}
    if not pairs:
        return
    for h, v, n, avg, valid in HostAppVersion.objects.filter(
        host_id__in={h for h, _ in pairs}, app_version_id__in={v for _, v in pairs}
    ).values_list("host_id", "app_version_id", "pfc_n", "pfc_avg", "consecutive_valid"):
        changes.havs[(h, v)] = credit_rules.HavPfc(n, avg, valid)


def wu_events(changes: Changes, before: Mapping[int, Mapping[str, Any]], wus: Iterable[Workunit]) -> None:
    for wu in wus:
        old = before[wu.pk]
        for name in ("canonical_result_id", "assimilate_state", "error_mask", "target_nresults"):
            if getattr(wu, name) != old[name]:
                changes.events.append(
                    event(
                        time=changes.now,
                        actor=ACTOR,
                        workunit_id=wu.pk,
                        field=name.removesuffix("_id"),
                        old=old[name],
                        new=getattr(wu, name),
                        reason={
                            "error_mask": "too many success results without consensus",
                            "target_nresults": "no consensus: one more replica",
                        }.get(name, ""),
                    )
                )


def run_once(
    *,
    project: Project,
    now: int,
    batch_size: int,
    mod: int = 1,
    index: int = 0,
    daily_result_quota: int = DAILY_RESULT_QUOTA,
    keep_due_workunits: bool = True,
    credit_from_wu: bool = False,
    credit_from_runtime: bool = False,
    no_credit: bool = False,
    max_granted_credit: float = MAX_GRANTED_CREDIT,
    credit_by_app: bool = False,
    hav_last_copy_wins: bool = False,
) -> int:
    """One pass over ``project``'s workunits with need_validate; returns how many were handled.

    ``daily_result_quota`` (for the host app versions), ``keep_due_workunits`` (see
    ``immediate``) and the credit options (``backend.daemons.credit``) are the project's
    options (SchedulerConfig's). At most every AV_UPDATE_PERIOD of ``now`` the app versions'
    scales are updated first (credit.cpp update_av_scales, which BOINC's feeder runs).
    """
    host_app_version.check_quota(daily_result_quota)
    options = credit_rules.CreditOptions(
        credit_from_wu=credit_from_wu,
        credit_from_runtime=credit_from_runtime,
        no_credit=no_credit,
        max_granted_credit=max_granted_credit,
    )
    credit_rules.check_credit_options(SimpleNamespace(**vars(options), credit_by_app=credit_by_app))
    credit_rules.update_av_scales_when_due(project.pk, now)
    with transaction.atomic():
        wus = claim(
            Workunit.objects.filter(project=project).need_validation().select_related("app"),
            batch_size,
            mod=mod,
            index=index,
        )
        if not wus:
            return 0
        by_wu: dict[int, list[Result]] = {wu.pk: [] for wu in wus}
        for r in Result.objects.filter(workunit_id__in=list(by_wu)).order_by("id"):
            by_wu[r.workunit_id].append(r)
        files: dict[int | None, list[File]] = {}
        for f in File.objects.filter(result__workunit_id__in=list(by_wu)).order_by("name"):
            files.setdefault(f.result_id, []).append(f)
        before = {
            wu.pk: {
                name: getattr(wu, name)
                for name in ("canonical_result_id", "assimilate_state", "error_mask", "target_nresults")
            }
            for wu in wus
        }
        changes = Changes(
            now=now,
            project_id=project.pk,
            daily_result_quota=daily_result_quota,
            keep_due=keep_due_workunits,
            credit_options=options,
            credit_by_app=credit_by_app,
            hav_last_copy_wins=hav_last_copy_wins,
        )
        read_credit_state(changes, [r for rows in by_wu.values() for r in rows])
        for wu in wus:
            wu.app.project = project  # the comparisons read outputs from its upload directory
            handle_wu(wu, by_wu[wu.pk], Checker(wu.app, files), changes)
        wu_events(changes, before, wus)
        apply(changes, wus)
    return len(wus)
