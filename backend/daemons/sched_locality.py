"""Locality scheduling and on-demand work generation (reference/server.md §3.10; seed 004),
as BOINC's sched/sched_locality.cpp.

Locality scheduling sends a host results that use the big, sticky input files it already
holds, so that volunteers download each big file once and compute many workunits from it.
The scheduler calls ``send_work_by_locality`` for apps with ``App.locality_scheduling``
(``backend.daemons.sched_send.send_work``); the rules, after the seed and BOINC's
sched_locality.cpp:

1. A workunit's name is ``FILENAME__<rest>``; FILENAME (without ``__``) is its big input file.
2. The request lists the sticky files the host holds (``SchedulerRequest.file_infos``).
3. For each held file, in random order (``sorted_order``: increasing file name), the
   scheduler sends unsent results of that file's workunits.
4. For one volunteer and one file, results are sent in increasing id: only results with an id
   above the highest already sent to this volunteer for the file are looked at, in id order.
5. ``one_result_per_user_per_wu`` holds: a workunit the volunteer already has a result of is
   skipped (it is "excluded" for the volunteer), after the job's checks (rule 16).
6. A file with no unsent result: unless the file's ``no_work_available`` trigger is set, the
   scheduler sets its ``need_work`` trigger, waits ``wait_period`` seconds for the on-demand
   work generator and the transitioner, and looks once more. With ``no_work_available`` it
   looks only once.
7. A file still without sendable results is marked ``no_work`` (BOINC's ``files_no_work``
   directory). With ``file_deletion_strategy`` 1, a held file whose look sent nothing while
   the request still wants work is named for deletion (``delete_file_infos``), whatever is
   left of it for other volunteers (sched_locality.cpp send_work_locality). Seed 004's rule
   (``seed004_delete_only_finished``): only when the project can make no more work for it
   (``no_work_available``) and none is unsent.
8. A host that holds no file (or whose files gave too little work) gets one file F chosen
   uniformly from the working set, at random (``sorted_order``: in turn by its RPC count).
   F's results are sent as in rules 4-6; a file without sendable results is marked
   ``no_work``.
9. If the request still wants work, the scheduler scans every file of the app's results in
   their names' order (``FILE__``), from F to the last and round from the first to F, or from
   the first when the working set is empty (send_new_file_work_deterministic); the scan
   stops at the first file that sends something, and rules 10, 8 and 9 are tried again
   while work is wanted, until a scan sends nothing (send_new_file_work). Seed 004's rule
   (``seed004_scan_only_excluded``): the scan only when F is excluded for the volunteer (it
   has unsent results, none of which rules 4-5 let this volunteer have), over the files that
   have unsent results other than F and the host's, at most ten; an empty working set, or an
   F that fills only part of the request, leaves the rest unfilled for the working-set
   manager to top up. The seed avoids the scan in general because every host scanning the
   same order would flock to the same file, which the random choice from the working set
   avoids.

Beside those, after BOINC's sched_locality.cpp and sched_send.cpp (docs/server-fidelity.md
lists each with the BOINC function it follows):

10. Old work first (send_work_locality, send_old_work): with
    ``<locality_scheduling_send_timeout>`` T > 0 and a host that downloads faster than
    100,000 bytes/s (its ``<net_stats><bwdown>``), the oldest unsent result created before
    now − T (rounded down to the hour) is tried before anything else, and, once sent, more
    of its file's results as in rules 4-6. Before a working-set file is chosen (rule 8),
    the oldest result created in a window from a random time between T and T/2 ago to T/2
    ago (its end rounded down to the hour) is tried the same way, whatever the host's speed
    (send_new_file_work).
11. Disk (check_disk, decrement_disk_space_locality, delete_file_from_host): a request that
    says how much disk its host has (``SchedulerRequest.models_disk``) may fill what
    max_allowable_disk allows (``max_allowable_disk``); a job whose ``rsc_disk_bound``
    exceeds what is left is not sent, and each job sent takes its bound, less its file's
    size when the host has the file or an earlier job of the reply brings it. As in
    sched_send.cpp work_needed(true), a job refused for memory, disk or its deadline
    (checked in that order) ends the locality search of the request (``WorkNeeded``), and so
    does a host at its limit of jobs in progress on the resource, and a job no version of
    the host may run (committed to another version, or its app at its daily quota or its
    limit of jobs in progress: possibly_send_result's ERR_NO_APP_VERSION; not so old work
    tried before the host's files, rule 10, after which the search goes on to them); an app at its
    daily quota is still looked at, so held files looked at before such a job may be named
    for deletion (rule 7). A request that got no job at all with its disk short is told to
    delete one of the files it reported: the one at position host id modulo their number in
    its list, with "BOINC will delete file F when no longer needed" and a request delay of 4
    hours (the client deletes it once no job of its needs it); with no file to name, "Not
    enough disk space ..." or "No disk space ..." and a delay of an hour.
12. ``File.no_delete`` (``<no_delete/>``) keeps a file from the file deleter
    (backend.daemons.file_deleter), and so from the list of files the project no longer has
    (backend.daemons.scheduler ``deleted_sticky_files``). BOINC's scheduler does not look at
    the flag when it names a file for a host to delete (rules 7 and 11): the file is still
    on the server, only the host's copy goes.
13. Homogeneous redundancy and homogeneous app version (sched_check.cpp
    wu_is_infeasible_fast, sched_send.cpp update_wu_on_send): a file's result goes only to a
    host of its workunit's class, with its committed version, and the first send commits
    the workunit, as on the ordinary path (backend.daemons.sched_hr).
14. A locality app's jobs go by the locality pass only, never by the ordinary scan.
15. A version over its daily quota is named only by the version choice of a job the pass
    looks at (sched_version.cpp get_app_version, daily_quota_exceeded).
16. possibly_send_result applies ``one_result_per_user_per_wu`` after get_app_version and
    wu_is_infeasible_fast: such a job is checked (and may end the search), then passed over.
17. A held file named by rule 7 and again by rule 11 is named twice (send_file_deletes).
18. An app with no version for the host still has its pass: its held files are looked at
    before its first job finds no version and ends the search (ERR_NO_APP_VERSION).

The options are the project's config.xml ones (``SchedulerConfig``:
``locality_scheduling_sorted_order``, ``locality_scheduling_wait_period``,
``locality_scheduling_send_timeout``, ``file_deletion_strategy`` 1 for rule 7's deletions,
``default_disk_min_free_gb``, and seed 004's rules in place of BOINC's,
``seed004_delete_only_finished`` (rule 7) and ``seed004_scan_only_excluded`` (rule 9)); a
caller may override all but the disk one with a ``LocalityConfig`` in the scheduler's config
(``SchedulerConfig.locality_config``), which also holds the scheduler's wait and the random
seed. A simulated world (world.simulation) does, and takes seed 004's rules 7 and 9: it
models the seed's project, whose working-set manager tops the set up and which leaves a
host's file alone while others still have its work.

The random choices (rules 3, 8 and 10) come from a ``random.Random`` seeded with the project's
``LocalityConfig.seed``, the host's key, its RPC number, the time and the resource. The key is
the host's id unless the caller names a stable one (``LocalityConfig.host_key``): a
simulated world passes its seed and the host's index in the world, so that its outcome does
not depend on database ids.

Around the scheduler (BOINC leaves both to the project):

- the **working-set manager** (``manage_working_set``) keeps N/M files in the working set, N
  the hosts active in the last day and M the app's ``target_nresults``: it removes files the
  scheduler marked ``no_work`` and adds files the generator can still make work for, in name
  order, after files that have unsent results again. A file's ``no_work`` mark is cleared
  when workunits are made for it, and by the manager when unsent results appear for it later
  (the transitioner's retry of an old workunit; seed 004: "it may be necessary to add it to
  the working set again");
- the **on-demand work generator** (``generate_on_demand``) creates workunits for each file
  whose ``need_work`` is set, clears it, and sets ``no_work_available`` once the file has had
  its share of workunits.

Triggers are rows of ``backend.models.LocalityTrigger`` instead of files, with the same
meaning.
"""

from __future__ import annotations

import math
import random
from collections.abc import Container, Iterable
from typing import TypeVar, cast

from django.db import connection
from django.db.models import Exists, Model, OuterRef, Q, QuerySet

from backend.daemons import sched_hr, sched_limit
from backend.daemons.hierarchy import project_dir
from backend.daemons.sched_send import (
    DEADLINE,
    DISK,
    MEMORY,
    NO_VERSION,
    ONLY_COLUMNS,
    Chosen,
    DiskSpace,
    Picker,
    Resource,
    Version,
    after_sending,
    disk_allowance,
    send_for_resource,
)
from backend.daemons.sched_types import LocalityConfig, Message, SchedulerConfig, SchedulerReply, SchedulerRequest
from backend.daemons.work_generator import LOCALITY_SEPARATOR, create_work_for_file
from backend.models import (
    App,
    AppVersion,
    File,
    FileDeleteState,
    Host,
    LocalityTrigger,
    Result,
    ServerState,
    TransitionerFlags,
    Workunit,
)

SEPARATOR = LOCALITY_SEPARATOR
ACTIVE_WINDOW = 86400
FALLBACK_FILES = 10
# sched_locality.cpp send_work_locality: old work goes to hosts downloading faster than this
# (bytes/s); sched_main.h DELAY_DISK_SPACE, DELAY_DELETE_FILE (seconds).
OLD_WORK_MIN_BWDOWN = 100000
DELAY_DISK_SPACE = 3600
DELAY_DELETE_FILE = 4 * 3600
# What a look at one file found (Sender.send_file_or_trigger).
SENT, EXCLUDED, NO_WORK = "sent", "excluded", "no work"

M = TypeVar("M", bound=Model)


def file_name_of(wu_name: str) -> str | None:
    """FILENAME of a workunit named ``FILENAME__<rest>`` (rule 1), or None."""
    head, sep, _ = wu_name.partition(SEPARATOR)
    return head if sep and head else None


def of_file(queryset: QuerySet[M], file_name: str, prefix: str = "workunit__") -> QuerySet[M]:
    return queryset.filter(**{f"{prefix}name__startswith": f"{file_name}{SEPARATOR}"})


def sendable(file_name: str, app_ids: Iterable[int]) -> QuerySet[Result]:
    """Unsent results of ``file_name``'s workunits that a scheduler may send."""
    return of_file(
        Result.objects.filter(
            server_state=ServerState.UNSENT,
            app_id__in=app_ids,
            workunit__error_mask=0,
            workunit__transitioner_flags=TransitionerFlags.ORDINARY,
        ),
        file_name,
    )


def file_picker(file_name: str) -> Picker:
    """``pick`` for send_for_resource: the file's results for this volunteer (rules 4-5)."""

    def pick(host: Host, app_ids: list[int], limit: int, config: SchedulerConfig) -> list[Result]:
        last, last_wu = (
            of_file(Result.objects.filter(project_id=host.project_id, user_id=host.owner_id), file_name)
            .order_by("-id")
            .values_list("id", "workunit_id")
            .first()
        ) or (0, None)
        queryset = sendable(file_name, app_ids).filter(id__gt=last)
        queryset = volunteer_has(queryset, host, config)
        queryset = queryset.select_related("workunit").only(*ONLY_COLUMNS).order_by("id")
        if connection.features.has_select_for_update_skip_locked:
            queryset = queryset.select_for_update(skip_locked=True, of=("self",))
        if not config.one_result_per_user_per_wu:
            return list(queryset[:limit])
        # send_results_for_file asks each time for the next result of another workunit than
        # the last one looked at (the volunteer's last, at first); the volunteer's other
        # workunits are left to possibly_send_result (rule 16)
        picked = []
        for result in queryset[:limit]:
            if last and result.workunit_id == last_wu:
                continue
            picked.append(result)
            last, last_wu = result.pk, result.workunit_id
        return picked

    return pick


def volunteer_has(queryset: QuerySet[Result], host: Host, config: SchedulerConfig) -> QuerySet[Result]:
    """With one_result_per_user_per_wu, each result marked ``volunteer_has`` when the host's
    owner has a result of its workunit: possibly_send_result applies the rule after
    get_app_version and wu_is_infeasible_fast, so such a job is still checked (its version's
    daily quota, its memory, disk and deadline, which may end the search) and then not sent
    (sched_send.send_for_resource)."""
    if not config.one_result_per_user_per_wu:
        return queryset
    return queryset.annotate(
        volunteer_has=Exists(Result.objects.filter(workunit_id=OuterRef("workunit_id"), user_id=host.owner_id))
    )


def old_work_picker(result_id: int) -> Picker:
    """``pick`` for send_for_resource: the one old result of rule 10 (sched_locality.cpp
    send_old_work, possibly_send_result)."""

    def pick(host: Host, app_ids: list[int], limit: int, config: SchedulerConfig) -> list[Result]:
        queryset = volunteer_has(
            Result.objects.filter(pk=result_id, server_state=ServerState.UNSENT, app_id__in=app_ids), host, config
        )
        queryset = queryset.select_related("workunit").only(*ONLY_COLUMNS)
        if connection.features.has_select_for_update_skip_locked:
            queryset = queryset.select_for_update(skip_locked=True, of=("self",))
        return list(queryset[:1])

    return pick


def oldest_unsent(app_ids: Iterable[int], *, before: int, after: int | None = None) -> tuple[int, str] | None:
    """(id, workunit name) of the oldest unsent result created before ``before`` (and after
    ``after``), or None (sched_locality.cpp send_old_work; ties by id)."""
    queryset = Result.objects.filter(
        server_state=ServerState.UNSENT,
        app_id__in=app_ids,
        create_time__lt=before,
        workunit__error_mask=0,
        workunit__transitioner_flags=TransitionerFlags.ORDINARY,
    )
    if after is not None:
        queryset = queryset.filter(create_time__gt=after)
    return queryset.order_by("create_time", "id").values_list("id", "workunit__name").first()


class WorkNeeded:
    """What ends one request's locality search besides its size (sched_send.cpp
    work_needed(true)): a job refused for memory, disk or its deadline (``insufficient``),
    and, for rule 11's accounting, the files the host has or this reply brings it. The disk
    left is the request's ``sched_send.DiskSpace``, shared with the ordinary path."""

    def __init__(
        self, *, held: Iterable[str] = (), insufficient: Iterable[str] = (), full_disk_bound: bool = False
    ) -> None:
        self.insufficient = set(insufficient)
        self.have = set(held)
        self.sizes: dict[str, int | None] = {}
        # SchedulerConfig.boinc_locality_full_disk_bound (BOINC defect 3): no discount for a
        # file the host has
        self.full_disk_bound = full_disk_bound

    @classmethod
    def for_request(
        cls, request: SchedulerRequest, config: SchedulerConfig, taken_wus: Iterable[int], carried: Iterable[str] = ()
    ) -> WorkNeeded:
        """A host already over its disk limits (max_allowable_disk below 0) is short from
        the start, and so is one whose lost results' resend found it short of memory, disk
        or time (``carried``: SchedulerReply.insufficient, BOINC's flags that last the
        request); the files of jobs already in the reply (``taken_wus``, by an earlier
        resource's pass) count as brought."""
        carried = {why for why in carried if why in (MEMORY, DISK, DEADLINE)}
        allowance = disk_allowance(request, config)
        if allowance is None:
            return cls(insufficient=carried)
        short = {DISK} if allowance[0] < 0 else set()
        needed = cls(
            held=[f.name for f in request.file_infos],
            insufficient=short | carried,
            full_disk_bound=config.boinc_locality_full_disk_bound,
        )
        for name in Workunit.objects.filter(id__in=taken_wus).values_list("name", flat=True):
            if file_name_of(name):
                needed.have.add(cast(str, file_name_of(name)))  # not None: just tested
        return needed

    @property
    def stopped(self) -> bool:
        return bool(self.insufficient)

    @property
    def disk_short(self) -> bool:
        return DISK in self.insufficient

    def stops(self, why: str) -> bool:
        """Whether a job refused for ``why`` ends the search: sched_check.cpp
        wu_is_infeasible_fast marks its resource insufficient for memory, disk (check_disk:
        more than is left) and the deadline, and work_needed(true) then stops; a job no
        version of the host can run (possibly_send_result's ERR_NO_APP_VERSION) ends the
        locality search at once (send_results_for_file, send_work_locality)."""
        if why in (MEMORY, DISK, DEADLINE, NO_VERSION):
            self.insufficient.add(why)
        return self.stopped

    def lift(self, why: str) -> None:
        """Forget that a job was refused for ``why``: a caller that goes on after it (NO_VERSION
        is a return code in BOINC, not a flag of the request, unlike memory, disk and speed)."""
        self.insufficient.discard(why)

    def took(self, wu: Workunit, disk: DiskSpace | None) -> None:
        """decrement_disk_space_locality: the job's bound comes off the disk left (``disk``, a
        sched_send.DiskSpace; None when the request does not model disk), less its file's
        size when the host has the file or an earlier job of the reply brings it (and the
        file is smaller than the bound). Under ``full_disk_bound`` the whole bound comes off,
        as BOINC's locality path does since it stopped calling decrement_disk_space_locality
        (docs/server-fidelity.md, BOINC defect 3)."""
        file_name = file_name_of(wu.name)
        if disk is not None:
            size = self.size(file_name) if file_name in self.have and not self.full_disk_bound else None
            if size is not None and size < wu.rsc_disk_bound:
                disk.available -= wu.rsc_disk_bound - size
            else:
                disk.take(wu)
        if file_name:
            self.have.add(file_name)

    def size(self, file_name: str) -> int | None:
        if file_name not in self.sizes:
            self.sizes[file_name] = (
                File.objects.filter(name=file_name, kind=File.Kind.INPUT).values_list("nbytes", flat=True).first()
            )
        return self.sizes[file_name]


def delete_file_from_host(
    host_key: int, request: SchedulerRequest, reply: SchedulerReply, config: SchedulerConfig
) -> str | None:
    """Rule 11's deletion (sched_locality.cpp delete_file_from_host, send_file_deletes)."""
    names = [f.name for f in request.file_infos]
    if not names:
        # not None: the disk is short only where the request says how much it has
        x, which = cast("tuple[float, str]", disk_allowance(request, config))
        maxdisk = max(x, 0.0)
        if maxdisk > 0:
            text = f"Not enough disk space (only {maxdisk / 1e6:.1f} MB free for BOINC). "
        else:
            text = f"No disk space (YOU must free {-1 * maxdisk / 1e6:.1f} MB before BOINC gets space). "
        if x:
            text += {
                "max_used": "Review preferences for maximum disk space used.",
                "max_frac": "Review preferences for maximum disk percentage used.",
                "min_free": "Review preferences for minimum disk free space allowed.",
            }[which]
        reply.messages.append(Message(text, "notice"))
        reply.request_delay = max(reply.request_delay, DELAY_DISK_SPACE)
        return None
    name = names[host_key % len(names)]
    message = Message(f"BOINC will delete file {name} when no longer needed", "low")
    if message not in reply.messages:  # once a request, whichever resource's pass asks
        # beside rule 7's deletion of the same file, if any: BOINC's send_file_deletes
        # appends it again, and the client is told twice
        reply.delete_file_infos.append(name)
        reply.messages.append(message)
    reply.request_delay = max(reply.request_delay, DELAY_DELETE_FILE)
    return name


class Sender:
    """One request's locality pass for one resource: what is left to send and what was sent."""

    def __init__(
        self,
        host: Host,
        request: SchedulerRequest,
        resource: Resource,
        versions: dict[int, Version],
        *,
        now: int,
        config: SchedulerConfig,
        max_jobs: int,
        taken_wus: set[int],
        work_needed: WorkNeeded | None = None,
        notices: list[str] | None = None,
        in_progress: sched_limit.InProgress | None = None,
        refusals: set[str] | None = None,
        hr_last: sched_hr.LastCheck | None = None,
    ) -> None:
        self.host, self.request, self.versions = host, request, versions
        self.resource, self.now, self.config = resource, now, config
        self.max_jobs, self.taken_wus = max_jobs, taken_wus
        self.host_class = sched_hr.HostClass(host, request)
        self.work_needed = work_needed or WorkNeeded()
        self.notices, self.in_progress = notices, in_progress
        self.refusals, self.hr_last = refusals, hr_last
        self.sent: list[Chosen] = []

    @property
    def satisfied(self) -> bool:
        """Nothing more to send: the request is met, the host is at its limit of jobs in
        progress on the resource, or a job was refused for memory, disk or its deadline
        (sched_send.cpp work_needed(true))."""
        r = self.resource
        return (
            len(self.sent) >= self.max_jobs
            or (r.req_secs <= 0 and r.req_instances <= 0)
            or self.work_needed.stopped
            or (self.in_progress is not None and self.in_progress.project_exceeded(r.name))
        )

    def send(self, pick: Picker) -> int:
        """Send what fits of the results ``pick`` lists; return how many."""
        if self.satisfied:
            return 0
        got = send_for_resource(
            self.host,
            self.resource,
            self.versions,
            now=self.now,
            config=self.config,
            max_jobs=self.max_jobs - len(self.sent),
            taken_wus=self.taken_wus,
            pick=pick,
            request=self.request,
            host_class=self.host_class,
            work_needed=self.work_needed,
            notices=self.notices,
            in_progress=self.in_progress,
            refusals=self.refusals,
            hr_last=self.hr_last,
        )
        self.resource = after_sending(self.resource, got)
        self.sent.extend(got)
        return len(got)

    def send_file(self, file_name: str) -> int:
        """Send what fits of ``file_name``'s results; return how many."""
        return self.send(file_picker(file_name))

    def send_old(self, locality: LocalityConfig, *, before: int, after: int | None = None, first: bool) -> None:
        """Rule 10: the oldest unsent result created in (after, before), then more of its
        file's results (send_old_work).

        An old result no version of the host may run (possibly_send_result's
        ERR_NO_APP_VERSION) ends the search only after a working-set choice
        (send_new_file_work gives up); the ``first`` look, before the host's files, goes on
        to them (send_work_locality only logs what send_old_work returns). A job of the old
        result's file with no version ends that file's look and no more: send_old_work
        returns what the old result's own send returned."""
        if self.satisfied:
            return
        app_ids = list(self.versions)
        found = oldest_unsent(app_ids, before=before, after=after)
        if found is None:
            return
        if not self.send(old_work_picker(found[0])):
            if first:
                self.work_needed.lift(NO_VERSION)
            return
        file_name = file_name_of(found[1])
        if file_name and self.send_file_or_trigger(file_name, locality) == NO_WORK:
            mark_no_work(file_name, app_ids)
        self.work_needed.lift(NO_VERSION)

    def send_file_or_trigger(self, file_name: str, locality: LocalityConfig) -> str:
        """Rule 6: send, else set need_work, wait and look once more.

        Returns SENT (something was sent, or nothing more is wanted), EXCLUDED (the file has
        unsent results but none for this volunteer, rules 4-5) or NO_WORK.
        """
        if self.send_file(file_name) or self.satisfied:
            return SENT
        app_ids = list(self.versions)
        if sendable(file_name, app_ids).exists():
            return EXCLUDED
        trigger = LocalityTrigger.objects.filter(file_name=file_name, app_id__in=app_ids).first()
        if trigger is None or trigger.no_work_available:
            return NO_WORK
        LocalityTrigger.objects.filter(pk=trigger.pk, need_work=False).update(need_work=True, need_work_time=self.now)
        # resolved(): config.xml's wait period where the caller gave none, and a wait
        assert locality.wait_period is not None and callable(locality.wait)
        if locality.wait_period <= 0:
            return NO_WORK
        locality.wait(file_name, now=self.now, seconds=locality.wait_period)
        if self.send_file(file_name):
            return SENT
        return EXCLUDED if sendable(file_name, app_ids).exists() else NO_WORK


def old_work_window(now: int, timeout: int, rng: random.Random) -> tuple[int, int]:
    """Rule 10's window before a working-set choice: ``(after, before)`` (send_new_file_work:
    from a random time between ``timeout`` and ``timeout``/2 ago to ``timeout``/2 ago; the
    end rounded down to the hour as send_old_work does)."""
    end = now - timeout // 2
    start = end - int(0.5 * rng.random() * timeout)
    return start, end // 3600 * 3600


def send_work_by_locality(
    host: Host,
    request: SchedulerRequest,
    resource: Resource,
    versions: dict[int, Version],
    *,
    now: int,
    config: SchedulerConfig,
    max_jobs: int,
    taken_wus: set[int],
    reply: SchedulerReply,
    notices: list[str] | None = None,
    in_progress: sched_limit.InProgress | None = None,
    refusals: set[str] | None = None,
    hr_last: sched_hr.LastCheck | None = None,
) -> tuple[list[Chosen], Resource]:
    """Choose and send jobs by locality (rules 2-13) for one resource of one request.

    ``notices`` (a list) gathers the memory message of a job refused for memory, and
    ``in_progress`` (sched_limit.InProgress) holds the limits on jobs in progress, as on the
    ordinary path (sched_send.cpp work_needed); ``refusals`` (a set) gathers why jobs were
    refused and ``hr_last`` (sched_hr.LastCheck) the last class check, for the request's
    messages, as the ordinary path's (the checks are sched_check.cpp wu_is_infeasible_fast's,
    which locality scheduling's possibly_send_result calls too).

    Returns the sent ``(result, version, runtime)`` tuples and the resource with what is left
    of its request, for the scheduler's ordinary pass over other apps.
    """
    assert config.locality_config is None or isinstance(
        config.locality_config, LocalityConfig
    )  # SchedulerConfig checks
    locality = (config.locality_config or LocalityConfig()).resolved(config)
    host_key = host.pk if locality.host_key is None else locality.host_key
    rng = random.Random(f"{locality.seed}:{host_key}:{request.rpc_seqno}:{now}:{resource.name}")
    needed = WorkNeeded.for_request(request, config, taken_wus, reply.insufficient)
    sender = Sender(
        host,
        request,
        resource,
        versions,
        now=now,
        config=config,
        max_jobs=max_jobs,
        taken_wus=taken_wus,
        work_needed=needed,
        notices=notices,
        in_progress=in_progress,
        refusals=refusals,
        hr_last=hr_last,
    )
    sent = sender_pass(sender, host_key, request, now=now, locality=locality, rng=rng, reply=reply)
    if needed.disk_short and not taken_wus:  # rule 11
        delete_file_from_host(host_key, request, reply, config)
    return sent


def sender_pass(
    sender: Sender,
    host_key: int,
    request: SchedulerRequest,
    *,
    now: int,
    locality: LocalityConfig,
    rng: random.Random,
    reply: SchedulerReply,
) -> tuple[list[Chosen], Resource]:
    """Rules 10 and 2-9 in BOINC's order; returns what send_work_by_locality does."""
    app_ids = list(sender.versions)
    if locality.send_timeout and request.host_info.n_bwdown > OLD_WORK_MIN_BWDOWN:  # rule 10
        sender.send_old(locality, before=(now - locality.send_timeout) // 3600 * 3600, first=True)
    held = sorted(
        set(
            File.objects.filter(
                name__in=[f.name for f in request.file_infos if f.status == 1], sticky=True, kind=File.Kind.INPUT
            ).values_list("name", flat=True)
        )
    )
    if not locality.sorted_order:
        rng.shuffle(held)
    for file_name in held:  # rules 3-7
        if sender.satisfied:
            break
        before = len(sender.sent)
        found = sender.send_file_or_trigger(file_name, locality)
        if locality.delete_only_finished:
            if found == NO_WORK:
                no_work_for_host(file_name, app_ids, locality, reply)
            continue
        if found == NO_WORK:
            mark_no_work(file_name, app_ids)
        if len(sender.sent) == before and not sender.satisfied:
            delete_held_file(file_name, locality, reply)
    if locality.scan_only_excluded:
        seed_new_file(sender, host_key, request, now=now, locality=locality, rng=rng, held=held)
    else:
        new_file(sender, host_key, request, now=now, locality=locality, rng=rng)
    return sender.sent, sender.resource


def old_work_before_new_file(sender: Sender, *, now: int, locality: LocalityConfig, rng: random.Random) -> bool:
    """Rule 10 before a new file is chosen: with a send timeout, the oldest result of the
    window ``old_work_window`` draws; whether the request is then satisfied."""
    if locality.send_timeout:
        after, before = old_work_window(now, locality.send_timeout, rng)
        sender.send_old(locality, before=before, after=after, first=False)
    return sender.satisfied


def seed_new_file(
    sender: Sender,
    host_key: int,
    request: SchedulerRequest,
    *,
    now: int,
    locality: LocalityConfig,
    rng: random.Random,
    held: Iterable[str],
) -> None:
    """Rules 8-9 after the seed (``scan_only_excluded``): one working-set file, and the scan
    only when it is excluded for the volunteer."""
    app_ids = list(sender.versions)
    if sender.satisfied or old_work_before_new_file(sender, now=now, locality=locality, rng=rng):
        return
    chosen = working_set_choice(host_key + request.rpc_seqno, rng, locality, app_ids, exclude=set(held))  # rule 8
    if chosen is None:
        return
    found = sender.send_file_or_trigger(chosen, locality)
    if found == NO_WORK:
        mark_no_work(chosen, app_ids)
    elif found == EXCLUDED:  # rule 9
        for file_name in fallback_files(app_ids, exclude=set(held) | {chosen}):
            if sender.satisfied:
                break
            sender.send_file(file_name)


def new_file(
    sender: Sender, host_key: int, request: SchedulerRequest, *, now: int, locality: LocalityConfig, rng: random.Random
) -> None:
    """Rules 8-9 as sched_locality.cpp send_new_file_work: while work is needed, old work
    (rule 10), a working-set file, then the deterministic scan from that file (or from the
    first file when the set is empty) to the last and round to it again; a scan that sends
    nothing ends the search."""
    app_ids = list(sender.versions)
    while not sender.satisfied:
        if old_work_before_new_file(sender, now=now, locality=locality, rng=rng):
            return
        chosen = working_set_choice(host_key + request.rpc_seqno, rng, locality, app_ids, exclude=set())  # rule 8
        if chosen is not None:
            if sender.send_file_or_trigger(chosen, locality) == NO_WORK:
                mark_no_work(chosen, app_ids)
            if sender.satisfied:
                return
        if not scan_files(sender, locality, app_ids, start=chosen or ""):  # rule 9
            return


def scan_files(sender: Sender, locality: LocalityConfig, app_ids: list[int], *, start: str) -> bool:
    """Rule 9's deterministic scan (send_new_file_work_deterministic): the files of the
    app's results in their results' name order (``FILE__``), from the first after ``start``
    to the last, then, with a ``start``, from the first up to ``start``; stops at the first
    file that sends something. Returns whether one did."""
    files = result_files(app_ids)
    passes = [[name for name in files if name + SEPARATOR > start]]
    if start:
        wrap, floor = [], ""
        for name in files:
            if floor >= start:
                break
            wrap.append(name)
            floor = name + SEPARATOR + "~"
        passes.append(wrap)
    for names in passes:
        for file_name in names:
            if sender.satisfied:
                return False
            before = len(sender.sent)
            if sender.send_file_or_trigger(file_name, locality) == NO_WORK:
                mark_no_work(file_name, app_ids)
            if len(sender.sent) > before:
                return True
    return False


def result_files(app_ids: Iterable[int]) -> list[str]:
    """The files of the app's workunits, in their names' order (``FILE__``), whatever their
    results' states: BOINC's scan looks at every result name."""
    names = set()
    rows = Workunit.objects.filter(app_id__in=app_ids).order_by().values_list("name", flat=True)
    for wu_name in rows.iterator(chunk_size=1000):
        file_name = file_name_of(wu_name)
        if file_name:
            names.add(file_name)
    return sorted(names, key=lambda name: name + SEPARATOR)


def delete_held_file(file_name: str, locality: LocalityConfig, reply: SchedulerReply) -> None:
    """Rule 7 as sched_locality.cpp send_work_locality: with ``delete_files``, a held file
    that sent nothing while work is still wanted is named for deletion."""
    if locality.delete_files and file_name not in reply.delete_file_infos:
        reply.delete_file_infos.append(file_name)


def mark_no_work(file_name: str, app_ids: Iterable[int]) -> None:
    """files_no_work: the working-set manager drops the file (rule 7)."""
    if not sendable(file_name, app_ids).exists():
        LocalityTrigger.objects.filter(file_name=file_name, no_work=False).update(no_work=True)


def no_work_for_host(file_name: str, app_ids: Iterable[int], locality: LocalityConfig, reply: SchedulerReply) -> None:
    """Seed 004's rule 7 for a file the host holds that gave it nothing."""
    mark_no_work(file_name, app_ids)
    if not locality.delete_files or file_name in reply.delete_file_infos:
        return
    finished = LocalityTrigger.objects.filter(file_name=file_name, no_work_available=True).exists()
    if finished and not sendable(file_name, app_ids).exists():
        reply.delete_file_infos.append(file_name)


def working_set_choice(
    turn: int, rng: random.Random, locality: LocalityConfig, app_ids: Iterable[int], *, exclude: Container[str]
) -> str | None:
    """A file of the working set, uniformly (rule 8): at random, or with ``sorted_order`` the
    one at position ``turn`` (the host's key plus its RPC number) in name order. None when
    the set is empty."""
    names = [
        name
        for name in LocalityTrigger.objects.filter(in_working_set=True, app_id__in=app_ids)
        .order_by("file_name")
        .values_list("file_name", flat=True)
        if name not in exclude
    ]
    if not names:
        return None
    if locality.sorted_order:
        return names[turn % len(names)]
    return rng.choice(names)


def fallback_files(app_ids: Iterable[int], *, exclude: Container[str], limit: int = FALLBACK_FILES) -> list[str]:
    """Files with unsent results in name order, outside the working set (seed 004's
    rule 9)."""
    names = []
    rows = (
        Workunit.objects.filter(app_id__in=app_ids, error_mask=0, results__server_state=ServerState.UNSENT)
        .order_by("name")
        .values_list("name", flat=True)
        .distinct()
    )
    for wu_name in rows.iterator(chunk_size=200):
        file_name = file_name_of(wu_name)
        if file_name and file_name not in exclude and file_name not in names:
            names.append(file_name)
            if len(names) >= limit:
                break
    return names


# --- the project's daemons around the scheduler ---------------------------------------------


def working_set_size(app: App, *, now: int) -> int:
    """N/M: hosts that can run the app (their platform has a version of it) active (created
    or heard from) in the last day, over the app's target_nresults, at least 1. Counting only
    the app's hosts keeps one project's population from sizing another's working set when
    several share a database."""
    since = now - ACTIVE_WINDOW
    platforms = AppVersion.objects.filter(app=app, deprecated=False).values("platform")
    active = (
        Host.objects.filter(project_id=app.project_id, platform__in=platforms)
        .filter(Q(rpc_time__gte=since) | Q(create_time__gte=since, create_time__lte=now))
        .count()
    )
    return max(1, math.ceil(active / max(app.target_nresults, 1)))


def has_unsent_results() -> Exists:
    """Whether a trigger's file has results a scheduler may send, found through the workunits
    that read the file (``Workunit.input_files``, which the indexes serve, where the name
    prefix of rule 1 would need a scan)."""
    return Exists(
        Result.objects.filter(
            app_id=OuterRef("app_id"),
            server_state=ServerState.UNSENT,
            workunit__error_mask=0,
            workunit__transitioner_flags=TransitionerFlags.ORDINARY,
            workunit__input_files__name=OuterRef("file_name"),
        )
    )


def manage_working_set(app: App, *, now: int) -> int:
    """The working-set manager: drop files marked no_work, top the set up to N/M files.

    A file marked no_work that has unsent results again (the transitioner made a retry of
    one of its workunits) loses the mark and comes first when the set is topped up, even when
    the generator can make no more workunits for it. Returns the number of files re-opened,
    added or removed.
    """
    triggers = LocalityTrigger.objects.filter(app=app)
    reopened = triggers.filter(no_work=True).filter(has_unsent_results()).update(no_work=False)
    removed = triggers.filter(in_working_set=True, no_work=True).update(in_working_set=False)
    missing = working_set_size(app, now=now) - triggers.filter(in_working_set=True).count()
    added = 0
    if missing > 0:
        ids = list(
            triggers.filter(in_working_set=False, no_work=False)
            .alias(ready=has_unsent_results())
            .filter(Q(no_work_available=False) | Q(ready=True))
            .order_by("-ready", "file_name")
            .values_list("id", flat=True)[:missing]
        )
        added = LocalityTrigger.objects.filter(id__in=ids).update(in_working_set=True)
    return reopened + removed + added


def generate_on_demand(
    app: App, *, now: int, per_file: int, per_trigger: int | None = None, batch_size: int = 100
) -> int:
    """The on-demand work generator: workunits for files whose need_work is set.

    Each trigger adds up to ``per_trigger`` workunits (all of the file's share when None),
    "additional workunits for the file" (seed 004, on-demand work generation); once the file
    has its ``per_file`` workunits in all, its ``no_work_available`` is set. Returns the
    number of workunits made.
    """
    made = 0
    for trigger in LocalityTrigger.objects.filter(app=app, need_work=True).order_by("file_name")[:batch_size]:
        if not LocalityTrigger.objects.filter(pk=trigger.pk, need_work=True).update(need_work=False):
            continue  # another generator took it
        made += make_file_work(app, trigger.file_name, now=now, per_file=per_file, at_most=per_trigger)
    return made


def make_file_work(app: App, file_name: str, *, now: int, per_file: int, at_most: int | None = None) -> int:
    """Up to ``per_file`` workunits in all for one file, at most ``at_most`` of them now; sets
    no_work_available when the file has them all, and no_work when none could be made."""
    existing = Workunit.objects.filter(name__startswith=f"{file_name}{SEPARATOR}").count()
    count = per_file - existing
    if at_most is not None:
        count = min(count, at_most)
    made = 0
    # a file already deleted gets no more work; any other refusal is a fault to surface
    input_file = File.objects.filter(
        name=file_name, kind=File.Kind.INPUT, file_delete_state=FileDeleteState.INIT
    ).first()
    if count > 0 and input_file is not None:
        made = len(create_work_for_file(app, input_file, now=now, count=count))
    LocalityTrigger.objects.filter(app=app, file_name=file_name).update(
        no_work_available=made == 0 or existing + made >= per_file, no_work=made == 0
    )
    return made


def create_data_files(app: App, names: Iterable[str], *, nbytes: int, no_delete: bool = False) -> None:
    """Sticky input files for locality scheduling, with their trigger rows (rule 1);
    ``no_delete`` marks them to be kept by the file deleter (rule 12).

    The rows stand for big files in the download directory; the directory is made so the file
    deleter finds it, but the contents are not written (no daemon reads an input's bytes).
    A name containing ``__`` is refused with a ValueError naming it, before anything is made:
    FILENAME cannot contain ``__`` (seed 004).
    """
    names = list(names)
    bad = [name for name in names if SEPARATOR in name or not name]
    if bad:
        raise ValueError(
            f"locality data file name(s) {', '.join(map(repr, bad))}: a file "
            f"name must be non-empty and cannot contain {SEPARATOR!r}"
        )
    project_dir(app.project, "download").mkdir(parents=True, exist_ok=True)
    File.objects.bulk_create(
        [
            File(
                project_id=app.project_id,
                name=name,
                kind=File.Kind.INPUT,
                nbytes=nbytes,
                sticky=True,
                report_on_rpc=True,
                no_delete=no_delete,
                file_delete_state=FileDeleteState.INIT,
            )
            for name in names
        ]
    )
    LocalityTrigger.objects.bulk_create(
        [LocalityTrigger(project_id=app.project_id, app=app, file_name=name) for name in names]
    )
