"""BOINC 7's job scheduling: make_run_list and enforce_run_list (reference/client.md §6.3).

`make_run_list` orders candidate jobs: for each GPU type, EDF picks for projects with
predicted deadline misses and then priority picks; the same for the CPU. `enforce` then
walks the list sorted by `more_important` and keeps what fits, assigning GPU instances.
"""

from __future__ import annotations

import math
from array import array

from .rec import priority_init_with_jobs
from .state import QUEUED, RUNNING

WHY_EDF = "edf"
WHY_PRIORITY = "priority"
WHY_UNFINISHED = "unfinished_time_slice"
WHY_FIFO = "fifo"

# make_run_list's passes: EDF then priority, or priority alone
EDF_PASSES = (True, False)
PRIORITY_PASS = (False,)


def next_checkpoint_after(em, j, t: float) -> float:
    """The first checkpoint strictly after `t`: every checkpoint_period seconds from the
    start of the run interval; continuous under `--compat bce` or with no period (§9.8)."""
    cp = j.checkpoint_period
    if cp <= 0 or em.bce:
        return t
    return j.run_start + (math.floor((t - j.run_start) / cp) + 1) * cp


def finished_time_slice(em, j, now: float) -> bool:
    """finished_time_slice (reference/client.md §6.3): past run_interval_start +
    cpu_scheduling_period, and checkpointed after that point."""
    slice_end = j.run_start + em.period
    return now > slice_end and now >= next_checkpoint_after(em, j, slice_end)


# "strictly after" a time, on the 60 s grid (Emulator.grid rounds this up to the next step)
JUST_AFTER = 1e-6


def preemptible_at(em, j) -> float:
    """The first time at which `finished_time_slice` holds: the first checkpoint after the
    slice end, which already counts at that instant, or just after the slice end itself
    when checkpoints are continuous."""
    slice_end = j.run_start + em.period
    ckpt = next_checkpoint_after(em, j, slice_end)
    return ckpt if ckpt > slice_end else slice_end + JUST_AFTER


def first_preemptible_at(em) -> float:
    """min(preemptible_at(em, j) for j in em.running), as one loop: the first of the least
    (running jobs only; cpu_sched.pxd types them as JobStates)."""
    first = None
    for j in em.running:
        t = preemptible_at(em, j)
        if first is None or t < first:
            first = t
    if first is None:
        raise ValueError("first_preemptible_at() of no running job")
    return first


def promote_once_ran_edf(em, now: float, rr) -> None:
    """Keep deadline-miss marks against thrashing (reference/client.md §6.3 make_run_list 1)."""
    for j in em.running:
        if j.once_ran_edf and rr.misses.get((j.project.index, j.rsc), 0) > 0:
            j.rr_miss = True
    period = em.period
    t = now  # a C double in the compiled core; `now` itself is what the jobs are given
    for p in em.projects:
        for j in p.jobs:
            if j.rr_miss:
                j.last_deadline_miss_time = now
            else:
                last = j.last_deadline_miss_time
                if t - last < period:
                    j.rr_miss = True


def _runtime_remaining(em, j) -> float:
    """What earliest_deadline_result compares among jobs due at once. BOINC's emulator uses
    RESULT::estimated_runtime_remaining: a started job's real remainder at its speed, an
    unstarted one's estimate (the drawn size the server told) times the project's duration
    correction factor; intended compares the remaining FLOPs the client can know."""
    if em.bce:
        return j.runtime_remaining(j.flops)
    return j.est_flops_remaining(em.exact_estimates)


# the rules whose orders _Candidates keeps between calls
KEPT_RULES = ("best", "coproc")


class _Candidates:
    """One resource's jobs of each project for make_run_list's picks, each project's in the
    order of one pick rule (a stable sort of the arrival order, so the first of equals is the
    first to arrive, as a scan keeping the first strict minimum finds it). Nothing a pick
    reads changes during make_run_list but the projects' priorities and what is taken, so
    each order is sorted once and a pick looks only at the head of each project's order: the
    first job not taken.

    The orders of the rules whose keys read only which jobs a project has and whether each
    runs or has started (`KEPT_RULES`) outlive the call: they are kept with the project's
    jobs_version, which every such change bumps (job_lifecycle). cpu_sched.pxd makes it a
    C type, so a pick reaches a head without the interpreter's attribute look-ups."""

    def __init__(self, em, r: int):
        self.em = em
        self.r = r
        # rule -> by project index: [jobs in the rule's order, position of the head], or None
        self.heads: dict = {}
        # the orders kept between calls, and whether a project's jobs are split by resource
        kept = em.__dict__.get("_candidate_orders")
        if kept is None:
            kept = em._candidate_orders = {}
        self.kept = kept
        self.split = len(em.resources) > 1
        self.nprojects = len(em.projects)

    def _order(self, rule: str, p, key) -> list:
        kept = self.kept
        r = self.r
        keep = rule in KEPT_RULES
        if keep:
            hit = kept.get((rule, r, p.index))
            if hit is not None and hit[0] == p.jobs_version:
                return hit[1]
        jobs = p.jobs
        if self.split:
            hit = kept.get(("arrival", r, p.index))
            if hit is not None and hit[0] == p.jobs_version:
                jobs = hit[1]
            else:
                jobs = [j for j in jobs if j.rsc == r]
                kept[("arrival", r, p.index)] = (p.jobs_version, jobs)
        order = sorted(jobs, key=key)
        if keep:
            kept[(rule, r, p.index)] = (p.jobs_version, order)
        return order

    def head(self, rule: str, p, taken: set, key):
        """The project's first job by `rule` (sorted by `key`) not yet taken, or None."""
        entries = self.heads.get(rule)
        if entries is None:
            entries = self.heads[rule] = [None] * self.nprojects
        i = p.index
        entry = entries[i]
        if entry is None:
            entry = entries[i] = [self._order(rule, p, key), 0]
        order = entry[0]
        k = entry[1]
        n = len(order)
        while k < n and order[k] in taken:
            k += 1
        entry[1] = k
        return order[k] if k < n else None


# earliest_deadline_result treats every job of a project whose duration correction factor
# is at least this as a deadline miss (cpu_sched.cpp)
EDF_ALL_JOBS_DCF = 90.0


def _edf_key(em):
    """earliest_deadline_result's order of jobs: earliest report deadline, then a started
    job, then the least remaining time."""

    def key(j):
        return (j.deadline, not j.started, _runtime_remaining(em, j))

    return key


def _earliest_deadline_result(em, cands: _Candidates, r: int, misses: dict, taken: set, key):
    """earliest_deadline_result (§6.3 step 5): only projects with predicted misses left, or
    whose duration correction factor is EDF_ALL_JOBS_DCF or more, whose jobs are all taken
    as misses; the first job by `key` (`_edf_key`)."""
    best = None
    best_key = None
    for p in em.projects:
        if misses.get((p.index, r), 0) <= 0 and p.dcf < EDF_ALL_JOBS_DCF:
            continue
        j = cands.head("edf", p, taken, key)
        if j is not None:
            k = key(j)
            if best_key is None or k < best_key:
                best, best_key = j, k
    return best


def _best_job_key(j):
    """The project's next job: already running, then preempted ones, then in arrival order
    (assign_results_to_projects)."""
    return (j.state != RUNNING, not j.started, j.index)


def _best_job_key_bce(j):
    """assign_results_to_projects as BOINC walks it (`--compat bce`): the started jobs in the
    order of their tasks (first start, JobState.task_seq), the first running one, else the
    first still in memory, else the first; then the jobs never started, in arrival order.
    Intended takes started jobs in arrival order (_best_job_key)."""
    running = j.state == RUNNING
    return (not running, not (running or j.in_memory), j.task_seq, j.index)


def _coproc_job_key(j):
    return (not j.started, j.index)


def _results_index(j) -> int:
    """RESULT::index as BOINC's emulator leaves it: a result read from client_state.xml has
    its place in the sorted results (sort_results at start-up), a result the emulated server
    sent has 0, as RESULT::clear sets it, since simulate_rpc does not sort the results again
    as the client's handle_scheduler_reply does. Initial jobs are the first the run makes, in
    that order (JobLifecycle._add_initial_jobs)."""
    return j.index - 1 if j.initial else 0


def _coproc_job_key_bce(j):
    """first_coproc_result's order within a project under `--compat bce`: a started job
    first, then the least RESULT::index (`_results_index`), then the client's result order."""
    return (not j.started, _results_index(j), j.index)


class _Picks:
    """What make_run_list's picks read and move of the projects, as columns by place in the
    emulator's project order: projected REC (rec_temp) and scheduling priority, which each pick
    charges (adjust_rec_sched and compute_priority, reference/client.md §6.2, with their
    arithmetic), and the share and share_frac they are computed from. `start` copies them
    from the projects after project_priority_init, `write_back` returns the charged ones.
    One `_Picks` serves every make_run_list of a run (`for_emulator`); cpu_sched.pxd gives
    the columns and the scans C types."""

    def __init__(self, em):
        n = len(em.project_order)
        self.n = n
        self.projects = list(em.project_order)
        self.place = array("i", bytes(4 * len(em.projects)))  # project index -> place in the order
        for k, p in enumerate(self.projects):
            self.place[p.index] = k
        self.rec_temp = array("d", bytes(8 * n))
        self.priority = array("d", bytes(8 * n))
        self.share = array("d", bytes(8 * n))
        self.share_frac = array("d", bytes(8 * n))
        self.charged = array("i", bytes(4 * n))
        self.is_open = array("i", bytes(4 * n))
        self.rec_sum = 1.0
        self.total_peak_flops = 1.0

    @staticmethod
    def for_emulator(em) -> _Picks:
        picks = em.__dict__.get("_run_list_picks")
        if picks is None:
            picks = em._run_list_picks = _Picks(em)
        return picks

    def start(self, rec_sum: float, total_peak_flops: float) -> None:
        """Copy the projects' REC and priorities as project_priority_init left them."""
        self.rec_sum = rec_sum
        self.total_peak_flops = total_peak_flops
        projects = self.projects
        for k in range(self.n):
            p = projects[k]
            self.rec_temp[k] = p.rec_temp
            self.priority[k] = p.priority
            self.share[k] = p.share
            self.share_frac[k] = p.share_frac
            self.charged[k] = 0

    def charge(self, k: int, job_peak_flops: float) -> None:
        """adjust_rec_sched (§6.2): charge the project at place `k` about one hour's worth of
        credit for a job put on the run list, then compute_priority."""
        rec_sum = self.rec_sum
        self.rec_temp[k] += job_peak_flops / self.total_peak_flops * rec_sum / 24.0
        rec_frac = self.rec_temp[k] / rec_sum
        if self.share[k] == 0:
            self.priority[k] = -1e3 - rec_frac
        elif self.share_frac[k] > 0:
            self.priority[k] = -rec_frac / self.share_frac[k]
        else:
            self.priority[k] = -rec_frac
        self.charged[k] = 1

    def write_back(self) -> None:
        """The charged projects' REC and priorities back to the projects."""
        projects = self.projects
        for k in range(self.n):
            if self.charged[k]:
                p = projects[k]
                p.rec_temp = self.rec_temp[k]
                p.priority = self.priority[k]

    def first_coproc_result(self, cands: _Candidates, taken: set):
        """first_coproc_result (§6.3 step 3): the job of the highest-priority project, then an
        already-started job, then the earliest arrival (under bce the least RESULT::index,
        `_results_index`); a running job has no precedence over a preempted one. A project of
        lower priority than the best so far is not looked into."""
        best = None
        best_key = None
        projects = self.projects
        bce = cands.em.bce
        job_key = _coproc_job_key_bce if bce else _coproc_job_key
        for k in range(self.n):
            npr = -self.priority[k]
            if best_key is not None and npr > best_key[0]:
                continue
            j = cands.head("coproc", projects[k], taken, job_key)
            if j is None:
                continue
            key: tuple
            if bce:
                # among equals the earliest in the client's result order: BOINC's emulator
                # gives every job it fetched the same RESULT::index, 0 (_results_index)
                key = (npr, not j.started, _results_index(j), j.index)
            else:
                key = (npr, not j.started, j.index)
            if best_key is None or key < best_key:
                best, best_key = j, key
        return best

    def open_all(self) -> None:
        """Every project may give a job to highest_priority_best."""
        for k in range(self.n):
            self.is_open[k] = 1

    def highest_priority_best(self, cands: _Candidates, taken: set, key):
        """highest_prio_project_best_result (§6.3 step 4): the best job (by `key`) of the
        project with the largest priority, the first in order among equals; a project with no
        job left is passed over from then on."""
        priority = self.priority
        is_open = self.is_open
        projects = self.projects
        while True:
            best = -1
            best_pr = 0.0
            for k in range(self.n):
                if is_open[k]:
                    pr = priority[k]
                    if best < 0 or pr > best_pr:
                        best = k
                        best_pr = pr
            if best < 0:
                return None
            j = cands.head("best", projects[best], taken, key)
            if j is not None:
                return j
            is_open[best] = 0


def make_run_list(em, now: float, rr, use_edf: bool, gpu_allowed: bool = True) -> list:
    """make_run_list (reference/client.md §6.3): an ordered list of candidate jobs with their
    `edf` flag set; each pick charges the project's REC (adjust_rec_sched).

    GPU types are scanned in their index order (the order of client_state.xml's coprocs), then
    the CPU, as make_run_list calls add_coproc_jobs for each type from 1 up; that order is the
    jobs' seqno, which breaks ties in enforce_run_list's more_important.

    GPU jobs are left out while GPU computing is suspended (PROC_RESOURCES::can_schedule), so
    they charge no REC. A GPU job is reserved instance by instance (reserve_coprocs); one
    that the instances' free parts cannot hold is passed over and the scan goes on
    (sufficient_coprocs), and the scan of a type stops when every instance is taken
    (stop_scan_coproc); a passed-over EDF job leaves its project's miss count as it was. The
    CPU scan stops when the single-thread jobs, or the multi-thread jobs, reach twice the
    CPUs (stop_scan_cpu); GPU jobs' CPU shares count in neither. A CPU job whose app already
    has max_concurrent jobs in the list is passed over the same way (max_concurrent_exceeded,
    counted from the start of the CPU scan; docs/engine-fidelity.md, "make_run_list passes
    over a CPU job at its app's max_concurrent")."""
    promote_once_ran_edf(em, now, rr)
    rec_sum = priority_init_with_jobs(em.projects, em.bce)
    # the priorities this list starts from and the picks' values, which the decision log
    # quotes; a run that keeps no series writes no decision log, and keeps none of them
    logs = em.keeps_series
    pick_log: list = []
    if logs:
        em.pick_table = {-1: [(p.name, p.priority) for p in em.project_order if p.jobs]}
        em.pick_log = {-1: pick_log}
    misses = dict(rr.misses)
    taken: set = set()
    out: list = []
    picks = _Picks.for_emulator(em)
    picks.start(rec_sum, em.total_peak_flops)
    place = picks.place
    best_key = _best_job_key_bce if em.bce else _best_job_key
    edf_key = _edf_key(em)
    resources = em.resources
    nres = len(resources)
    limit = 2 * em.n_usable_cpus
    # add_coproc_jobs for each GPU type in index order, then the CPU: r = 1, 2, ..., nres - 1, 0
    for ri in range(nres):
        r = (ri + 1) % nres
        res = resources[r]
        cpu = r == 0
        if not cpu and not gpu_allowed:
            continue
        used_st = used_mt = 0.0
        usage = [0.0] * res.ninstances  # PROC_RESOURCES' reservation of each GPU instance
        cands = _Candidates(em, r)
        napp: dict = {}  # the CPU passes' jobs per limited app, against its max_concurrent
        for edf_pass in EDF_PASSES if use_edf else PRIORITY_PASS:
            if cpu and not edf_pass:
                picks.open_all()
            while (used_st < limit and used_mt < limit) if cpu else _has_free(usage):
                if edf_pass:
                    j = _earliest_deadline_result(em, cands, r, misses, taken, edf_key)
                elif cpu:
                    j = picks.highest_priority_best(cands, taken, best_key)
                else:
                    j = picks.first_coproc_result(cands, taken)
                if j is None:
                    break
                taken.add(j)
                if not cpu and not _reserve_gpu(usage, j.gpu_usage):
                    continue
                mc = j.app.max_concurrent if cpu else 0
                if mc:
                    if napp.get(j.app, 0) >= mc:
                        continue
                    napp[j.app] = napp.get(j.app, 0) + 1
                p = j.project
                if edf_pass:
                    misses[(p.index, r)] = misses.get((p.index, r), 0) - 1
                k = place[p.index]
                j.edf = edf_pass
                if logs:
                    j.pick_value = picks.priority[k]
                    j.pick_seq = len(pick_log)
                out.append(j)
                if cpu and j.avg_ncpus > 1:
                    used_mt += j.avg_ncpus
                elif cpu:
                    used_st += j.avg_ncpus
                picks.charge(k, j.peak_flops)
                if logs:
                    pick_log.append((p.name, picks.priority[k]))
    picks.write_back()
    return out


def _has_free(usage: list[float]) -> bool:
    """min(usage) < 1.0 (an instance not wholly reserved), without the call."""
    for u in usage:
        if u < 1.0:
            return True
    return False


def _reserve_gpu(usage: list[float], x: float) -> bool:
    """sufficient_coprocs, then reserve_coprocs: whether the instances' free parts add up
    to the job's usage; if so, take them first-fit, filling an instance whose free part is
    too small and going on with the rest on the next."""
    need = x
    for u in usage:
        need -= 1.0 - u
        if need <= 0:
            break
    else:
        return False
    for i, u in enumerate(usage):
        free = 1.0 - u
        if free >= x:
            usage[i] = u + x
            break
        usage[i] = 1.0
        x -= free
    return True


def more_important_key(j):
    """more_important (§6.3 enforce_run_list 3): EDF, GPU before CPU, unfinished time slice,
    more CPUs, run-list order."""
    gpu = j.rsc != 0
    return (not j.edf, not gpu, not j.unfinished, 0.0 if gpu else -j.avg_ncpus, j.seqno_key)


def _more_important(a, b) -> bool:
    """more_important_key(a) < more_important_key(b), compared field by field as the tuples
    compare, without building them: the first field that differs decides."""
    ea = bool(a.edf)
    if ea != bool(b.edf):
        return ea
    ga = a.rsc != 0
    if ga != (b.rsc != 0):
        return ga
    ua = bool(a.unfinished)
    if ua != bool(b.unfinished):
        return ua
    if not ga:
        na = a.avg_ncpus
        nb = b.avg_ncpus
        if na != nb:
            return na > nb  # -na < -nb
    sa = a.seqno_key
    sb = b.seqno_key
    return sa < sb


def _sort_more_important(jobs: list) -> None:
    """Sort `jobs` in place as sorted(jobs, key=more_important_key) orders them: an
    insertion sort that moves a job only before one it is strictly more important than, so
    equals keep their order (a stable sort's). The list comes from make_run_list nearly in
    this order already, so it takes about one comparison a job."""
    for i in range(1, len(jobs)):
        j = jobs[i]
        k = i
        while k > 0 and _more_important(j, jobs[k - 1]):
            jobs[k] = jobs[k - 1]
            k -= 1
        jobs[k] = j


def _by_arrival(jobs: list) -> list:
    """sorted(jobs, key=_arrival), by an insertion sort (the running jobs are few)."""
    out = list(jobs)
    for i in range(1, len(out)):
        j = out[i]
        a = j.index
        k = i
        while k > 0:
            b = out[k - 1].index
            if not a < b:
                break
            out[k] = out[k - 1]
            k -= 1
        out[k] = j
    return out


def _listed(run_list: list, j) -> bool:
    """Whether `j` is in `run_list`, once enforce has given each listed job its place as
    seqno_key: a job not listed may keep an old seqno_key, but the list's job at that place
    is then another one."""
    k = j.seqno_key
    return 0 <= k < len(run_list) and run_list[k] is j


def enforce(em, now: float, run_list: list, gpu_allowed: bool, keep_unfinished: bool = True) -> list:
    """enforce_run_list (reference/client.md §6.3): returns [(job, why, gpu_instance)].

    Running jobs that have not finished their time slice are appended; the list is sorted
    by `more_important`; the GPU jobs get their devices (`assign_coprocs`), which prunes the
    ones that find none; then, in order, a job whose app already runs max_concurrent jobs is
    skipped, CPU jobs stop at n_usable_cpus, and once the CPUs are all used a GPU job is
    still allowed while ncpus_used + avg_ncpus <= n_usable_cpus + 1.
    """
    n = len(run_list)
    for seq in range(n):
        j = run_list[seq]
        j.seqno_key = seq
        j.unfinished = False
    extra = n
    ordered = list(run_list)
    if keep_unfinished:
        bce = em.bce
        period = em.period
        # append_unfinished_time_slice gives every job it appends one seqno, the list's
        # length, so more_important orders them by its last tie-break, the RESULT pointers;
        # under bce they are taken in arrival order, the order a fresh heap hands out their
        # memory (docs/engine-fidelity.md, "Running jobs appended to the run list")
        for j in _by_arrival(em.running) if bce else em.running:
            # finished_time_slice, with the emulator's settings read once; under bce the
            # checkpoints are continuous (next_checkpoint_after returns the slice end)
            slice_end = j.run_start + period
            if not (now > slice_end and (bce or now >= next_checkpoint_after(em, j, slice_end))):
                j.unfinished = True
                if not _listed(run_list, j):
                    j.edf = False
                    j.seqno_key = extra
                    if not bce:
                        extra += 1
                    ordered.append(j)
    _sort_more_important(ordered)
    devices = assign_coprocs(em, ordered) if gpu_allowed else {}
    ncpus = em.n_usable_cpus
    ncpus_used = 0.0
    chosen = []
    napp: dict = {}  # jobs scheduled per app, against its max_concurrent (step 5)
    for j in ordered:
        rsc = j.rsc
        if rsc and j not in devices:
            continue
        app = j.app
        mc = app.max_concurrent
        if mc and napp.get(app, 0) >= mc:
            continue
        avg_ncpus = j.avg_ncpus
        if ncpus_used >= ncpus - 1e-9:
            if rsc == 0 or ncpus_used + avg_ncpus > ncpus + 1 + 1e-9:
                continue
        ncpus_used += avg_ncpus
        if mc:
            # only a limited app's count is read, and equal apps have equal limits
            napp[app] = napp.get(app, 0) + 1
        chosen.append((j, _why(j), devices[j] if rsc else -1))
    return chosen


def _arrival(j) -> int:
    return j.index


def _devices_of(j, count: int) -> list[int]:
    """The devices a running GPU job holds: its device, or for a job of several whole
    devices that many from its first."""
    if j.gpu_usage <= 1.0:
        return [j.instance]
    return list(range(j.instance, min(j.instance + math.ceil(j.gpu_usage - 1e-9), count)))


def assign_coprocs(em, ordered: list) -> dict:
    """assign_coprocs (client/coproc_sched.cpp): the device of each GPU job that gets one, in
    run-list order; the others are pruned from the list.

    Every running GPU job in the list first reserves its device as pending usage. A running
    job then keeps its device if the usage confirmed there so far leaves room for it; a new
    job of a fraction of a device takes the first device in use or reserved with room for
    it, else the first device nobody has confirmed; a job of whole devices takes devices
    nobody has confirmed, unreserved ones first. A job placed before a running one can so
    take its device only where BOINC would too, and then the running job is pruned.

    usage and pending hold each GPU type's instances by the type's index (the CPU's place,
    0, is an empty list); a running job that holds its device is marked in `held`."""
    resources = em.resources
    usage: list = [[]]
    pending: list = [[]]
    for r in range(1, len(resources)):
        usage.append([0.0] * resources[r].ninstances)
        pending.append([0.0] * resources[r].ninstances)
    held = []
    gpu_jobs = []  # the GPU jobs in order, each read once: (job, type)
    for j in ordered:
        rsc = j.rsc
        if not rsc:
            continue
        gpu_jobs.append((j, rsc))
        if j.state == RUNNING and j.instance >= 0:
            held.append(j)
            pend = pending[rsc]
            x = min(j.gpu_usage, 1.0)
            for d in _devices_of(j, len(pend)):
                pend[d] += x
    out = {}
    eps = 1e-9
    for j, rsc in gpu_jobs:
        use = usage[rsc]
        pend = pending[rsc]
        n = len(use)
        u = j.gpu_usage
        if held and _holds(held, j):
            x = min(u, 1.0)
            devs = _devices_of(j, n)
            fits = True
            for d in devs:
                if not use[d] + x <= 1.0 + eps:
                    fits = False
                    break
            if fits:
                for d in devs:
                    use[d] += x
                    pend[d] -= x
                out[j] = j.instance
            continue
        if u < 1.0:
            placed = False
            for i in range(n):
                if (use[i] or pend[i]) and use[i] + pend[i] + u <= 1.0 + eps:
                    use[i] += u
                    out[j] = i
                    placed = True
                    break
            if not placed:
                for i in range(n):
                    if not use[i]:
                        use[i] += u
                        out[j] = i
                        break
            continue
        need = math.ceil(u - eps)
        free = 0
        for i in range(n):
            if not use[i]:
                free += 1
        if free < need:
            continue
        # devices nobody uses: unreserved ones first, then reserved ones, each in order
        taken: list[int] = []
        for i in range(n):
            if len(taken) < need and not use[i] and not pend[i]:
                taken.append(i)
        first_pass = list(taken)
        for i in range(n):
            if len(taken) < need and not use[i] and i not in first_pass:
                taken.append(i)
        for i in taken:
            use[i] = 1.0
        out[j] = taken[0]
    return out


def _holds(held: list, j) -> bool:
    """Whether `j` is one of the running jobs in `held` (by identity, as a set of jobs finds it)."""
    for h in held:
        if h is j:
            return True
    return False


def _why(j) -> str:
    if j.edf:
        return WHY_EDF
    if j.unfinished:
        return WHY_UNFINISHED
    return WHY_PRIORITY


def queued_jobs_waiting(em) -> bool:
    """Whether a queued job waits (cpu_sched.pxd types the jobs as JobStates)."""
    for p in em.projects:
        for j in p.jobs:
            if j.state == QUEUED:
                return True
    return False
