"""Several worker processes per daemon on PostgreSQL: nothing lost, nothing done twice.

The first test runs the whole pipeline at the wall clock, every stage in 4 processes at once:
the work generator, the scheduler (volunteer hosts, a few per process, whose requests claim
from one pool of unsent results), the transitioner (first results, replicas after timeouts,
errors and disagreements), the validator (quorum 2), the assimilator and the file deleter.
"""

import json
import multiprocessing
import os
import random
import signal
import time
from collections import Counter

import pytest
from django.db import connections
from django.db.models import Count, F, Sum

from backend.daemons import get_daemon, work_generator
from backend.daemons.scheduler import (
    ReportedFile,
    ReportedResult,
    SchedulerConfig,
    handle_request,
)
from backend.models import (
    App,
    AssimilatedResult,
    AssimilateState,
    ClientState,
    File,
    FileDeleteState,
    Host,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import work_request
from tests.factories import (
    AppFactory,
    AppVersionFactory,
    FileFactory,
    HostFactory,
    ResultFactory,
    WorkunitFactory,
    demo_project,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DAEMONS = ["transitioner", "validator", "assimilator", "file_deleter"]
WORKUNITS = 10_000
CREDIT_PER_RESULT = 3600e9 * 200 / 86400e9

PER_DAEMON = 4
HOSTS_PER_SCHEDULER = 4
BAD_HOST_EVERY = 8  # two hosts in 16 returns wrong output: no consensus, more replicas
DROP_RATE = 0.03  # jobs a host never reports: timed out, replaced
ERROR_RATE = 0.02  # jobs that fail on the host: client errors, replaced
DELAY_BOUND = 30  # seconds: every dropped job times out within the test
JOB_SECONDS = 1.0  # rsc_fpops_est / flops
REQUEST_SECONDS = 100.0  # work asked per scheduler request: about 100 jobs
NCPUS = 16
SCHEDULER = SchedulerConfig(report_grace_period=0)


def finished_workunits(n, data_dir):
    """``n`` workunits whose one result came back SUCCESS, all due for the transitioner."""
    (data_dir / "upload").mkdir(exist_ok=True)
    (data_dir / "download").mkdir(exist_ok=True)
    now = int(time.time()) - 1000
    app = AppFactory(max_error_results=1, max_total_results=2, max_success_results=1)
    host = HostFactory()
    # the factories build the rows in memory, with no query per row (a result is named here:
    # the factory's name counts the workunit's results), and bulk_create saves them
    wus = Workunit.objects.bulk_create(
        WorkunitFactory.build(app=app, name=f"wu{i}", transition_time=now) for i in range(n)
    )
    results = Result.objects.bulk_create(
        ResultFactory.build(
            workunit=wu,
            name=f"{wu.name}_0",
            server_state=ServerState.OVER,
            outcome=Outcome.SUCCESS,
            host=host,
            sent_time=now - 100,
            received_time=now,
            report_deadline=now + 86400,
        )
        for wu in wus
    )
    File.objects.bulk_create(FileFactory.build(result=r, md5_cksum="0" * 32) for r in results)
    return host


def worker(name, idle_limit):
    """A daemon process: passes at the wall clock until ``idle_limit`` idle passes in a row."""
    connections.close_all()
    run_once, idle = get_daemon(name), 0
    while idle < idle_limit:
        done = run_once(project=demo_project(), now=int(time.time()), batch_size=100)
        idle = 0 if done else idle + 1
        if not done:
            time.sleep(0.1)
    connections.close_all()


def start_workers(per_daemon, idle_limit):
    connections.close_all()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=worker, args=(name, idle_limit)) for name in DAEMONS for _ in range(per_daemon)]
    for process in processes:
        process.start()
    return processes


def assert_each_done_exactly_once(n, host):
    assert Workunit.objects.count() == n
    assert Workunit.objects.exclude(assimilate_state=AssimilateState.DONE).count() == 0
    assert Workunit.objects.exclude(file_delete_state=FileDeleteState.DONE).count() == 0
    assert Result.objects.exclude(validate_state=ValidateState.VALID).count() == 0
    assert Result.objects.exclude(file_delete_state=FileDeleteState.DONE).count() == 0
    assert Result.objects.count() == n  # no replica made twice
    assert AssimilatedResult.objects.count() == n
    for field, new in (("assimilate_state", AssimilateState.DONE), ("validate_state", ValidateState.VALID)):
        events = LifecycleEvent.objects.filter(field=field, new=new)
        assert events.count() == n, field
    host.refresh_from_db()
    assert host.total_credit == pytest.approx(n * CREDIT_PER_RESULT)


def test_a_worker_killed_mid_pass_loses_nothing_and_the_next_passes_converge(postgres_only, data_dirs):
    n = 2000
    host = finished_workunits(n, data_dirs)
    processes = start_workers(2, idle_limit=40)
    time.sleep(1.5)
    victims = [p for p in processes if p.is_alive()][:4]
    for victim in victims:
        os.kill(victim.pid, signal.SIGKILL)
    for process in processes:
        process.join(timeout=600)
    killed = [p for p in processes if p.exitcode == -signal.SIGKILL]
    assert killed
    assert all(p.exitcode == 0 for p in processes if p not in killed)
    # the survivors and then rounds of passes finish the work. A workunit touched in one round
    # is due at that round's ``now`` and the transitioner takes ``transition_time < now``
    # (reference/server.md §3.2), so every round's ``now`` is a second later than the last.
    now, rounds = int(time.time()) + 2, 0
    while sum(get_daemon(name)(project=demo_project(), now=now, batch_size=1000) for name in DAEMONS):
        now, rounds = max(now + 1, int(time.time()) + 2), rounds + 1
        assert rounds < 100, "the passes do not converge"
    assert_each_done_exactly_once(n, host)


# --- the whole pipeline, every stage in four processes ------------------------------------


def pipeline_project():
    """An app of quorum 2 (target 2) the work generator feeds, and the volunteers' hosts."""
    app = AppFactory(
        min_quorum=2,
        target_nresults=2,
        max_error_results=3,
        max_total_results=8,
        max_success_results=5,
        delay_bound=DELAY_BOUND,
        rsc_fpops_est=JOB_SECONDS * 1e9,
        unsent_target=4000,
    )
    AppVersionFactory(app=app, flops=1e9)  # JOB_SECONDS of computing per job
    hosts = HostFactory.create_batch(PER_DAEMON * HOSTS_PER_SCHEDULER, p_ncpus=NCPUS)
    return app, [h.pk for h in hosts]


def daemon_worker(name, stop):
    """A daemon process: passes at the wall clock until told to stop."""
    connections.close_all()
    run_once = get_daemon(name)
    while not stop.is_set():
        if not run_once(project=demo_project(), now=int(time.time()), batch_size=200):
            time.sleep(0.5)
    connections.close_all()


def generator_worker(app_id, n):
    """A work generator process: tops up unsent results until ``n`` workunits exist."""
    connections.close_all()
    while Workunit.objects.count() < n:
        if not work_generator.run_once(project=demo_project(), now=int(time.time()), batch_size=1000):
            time.sleep(0.05)
    App.objects.filter(pk=app_id).update(unsent_target=0)
    connections.close_all()


def outcome_of(job, host_index, rng, now):
    """What a host makes of a job: None (never reported) or its report. A job past its
    deadline is dropped too: a late report could come after the run looks finished."""
    draw = rng.random()
    if draw < DROP_RATE or job.report_deadline < now:
        return None
    if draw < DROP_RATE + ERROR_RATE:
        return ReportedResult(
            job.name,
            client_state=ClientState.COMPUTE_ERROR,
            exit_status=1,
            final_elapsed_time=JOB_SECONDS,
            final_cpu_time=JOB_SECONDS,
        )
    bad = host_index % BAD_HOST_EVERY == BAD_HOST_EVERY - 1
    data = f"wrong {job.name}" if bad else job.wu_name
    return ReportedResult(
        job.name,
        final_elapsed_time=JOB_SECONDS,
        final_cpu_time=JOB_SECONDS,
        output_files=[ReportedFile(job.output_files[0].name, data=data.encode())],
    )


def scheduler_worker(index, host_ids, stop, out):
    """A scheduler process serving its own hosts in turn: each request reports the jobs of the
    host's last reply and asks for more. Writes the names of every job it sent, and every
    report it had rejected, to ``out``."""
    connections.close_all()
    rng = random.Random(index)
    hosts = list(Host.objects.filter(pk__in=host_ids).order_by("id"))
    held = {host.pk: [] for host in hosts}
    sent, rejected = [], []
    while not stop.is_set():
        busy = False
        for host in hosts:
            position = host_ids.index(host.pk) * PER_DAEMON + index
            now = int(time.time())
            reports = [r for r in (outcome_of(job, position, rng, now) for job in held[host.pk]) if r]
            reply = handle_request(
                work_request(host, cpu_req_secs=REQUEST_SECONDS, cpu_req_instances=NCPUS, results=reports),
                project=demo_project(),
                now=now,
                config=SCHEDULER,
            )
            held[host.pk] = reply.results
            sent.extend(job.name for job in reply.results)
            rejected.extend(f"{r.name}: {r.reason}" for r in reply.rejected)
            busy = busy or bool(reply.results or reports)
        if not busy:
            time.sleep(0.2)
    out.write_text(json.dumps({"sent": sent, "rejected": rejected}))
    connections.close_all()


def pipeline_done(generators):
    return (
        not any(p.is_alive() for p in generators)
        and not Workunit.objects.exclude(file_delete_state=FileDeleteState.DONE).exists()
        and not Result.objects.filter(file_delete_state=FileDeleteState.READY).exists()
    )


@pytest.mark.parametrize(
    "workunits",
    [
        # 2,000 workunits are ten batches of 200 for each stage's four processes, so every pass
        # races three others for the same rows from start to end, and at the drop and error
        # rates above some 60 jobs time out and 40 fail: every path below is taken.
        pytest.param(2_000, id="2000"),
        pytest.param(WORKUNITS, marks=pytest.mark.long, id="10000"),
    ],
)
def test_every_stage_in_four_processes_does_every_workunit_exactly_once(postgres_only, data_dirs, workunits):
    app, host_ids = pipeline_project()
    connections.close_all()
    context = multiprocessing.get_context("fork")
    stop = context.Event()
    outs = [data_dirs / f"scheduler{i}.json" for i in range(PER_DAEMON)]
    generators = [context.Process(target=generator_worker, args=(app.pk, workunits)) for _ in range(PER_DAEMON)]
    others = [context.Process(target=daemon_worker, args=(name, stop)) for name in DAEMONS for _ in range(PER_DAEMON)]
    others += [
        context.Process(target=scheduler_worker, args=(i, host_ids[i::PER_DAEMON], stop, outs[i]))
        for i in range(PER_DAEMON)
    ]
    processes = generators + others
    for process in processes:
        process.start()
    give_up = time.monotonic() + 900
    try:
        while not pipeline_done(generators):
            assert time.monotonic() < give_up, "the pipeline did not finish in 15 minutes"
            assert all(p.exitcode in (None, 0) for p in processes), "a worker failed"
            time.sleep(1)
    finally:
        stop.set()
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():  # stuck: end it, so that the test database can go
                process.kill()
                process.join()
    assert [p.exitcode for p in processes] == [0] * len(processes)
    assert_pipeline_did_each_workunit_exactly_once(app, outs, data_dirs, workunits)


def assert_pipeline_did_each_workunit_exactly_once(app, outs, data_dirs, workunits):
    wus = Workunit.objects.filter(app=app)
    n = wus.count()
    assert n >= workunits
    # each workunit assimilated once, its files deleted, with a canonical result or an error
    assert not wus.exclude(assimilate_state=AssimilateState.DONE).exists()
    assert not wus.filter(canonical_result=None, error_mask=0).exists()
    assert AssimilatedResult.objects.count() == n
    assimilated = LifecycleEvent.objects.filter(field="assimilate_state", new=AssimilateState.DONE)
    assert assimilated.count() == n
    assert assimilated.values("workunit").distinct().count() == n
    # no result sent twice: neither in the replies nor in the database's events
    reports = [json.loads(out.read_text()) for out in outs]
    sent = Counter(name for report in reports for name in report["sent"])
    assert sent and max(sent.values()) == 1
    assert [r for report in reports for r in report["rejected"]] == []
    sends = LifecycleEvent.objects.filter(field="server_state", new=ServerState.IN_PROGRESS)
    assert sends.count() == len(sent)
    assert not sends.values("result").annotate(n=Count("id")).filter(n__gt=1).exists()
    assert set(Result.objects.filter(sent_time__gt=0).values_list("name", flat=True)) == set(sent)
    # every result over, never more of them than max_total_results
    assert not Result.objects.exclude(server_state=ServerState.OVER).exists()
    assert not wus.annotate(n=Count("results")).filter(n__gt=app.max_total_results).exists()
    # the canonical results are valid, and credit was granted once per valid result
    assert not wus.exclude(canonical_result=None).exclude(canonical_result__validate_state=ValidateState.VALID).exists()
    valid = Result.objects.filter(validate_state=ValidateState.VALID)
    assert valid.exists() and valid.exclude(granted_credit=F("workunit__canonical_credit")).count() == 0
    assert LifecycleEvent.objects.filter(field="validate_state", new=ValidateState.VALID).count() == valid.count()
    for host in Host.objects.annotate(granted=Sum("results__granted_credit")):
        assert host.total_credit == pytest.approx(host.granted or 0.0)
    # the paths this run is meant to take were taken
    outcomes = Counter(Result.objects.values_list("outcome", flat=True))
    assert outcomes[Outcome.NO_REPLY] > 0 and outcomes[Outcome.CLIENT_ERROR] > 0
    assert LifecycleEvent.objects.filter(field="validate_state", new=ValidateState.INCONCLUSIVE).exists()
    assert Result.objects.filter(validate_state=ValidateState.INVALID, outcome=Outcome.SUCCESS).exists()
    assert wus.filter(target_nresults__gt=2).exists()
    # every input and output file is gone; the canonical outputs were copied first
    leftovers = [p for d in ("download", "upload") for p in (data_dirs / d).iterdir() if p.is_file()]
    assert leftovers == []
    assert File.objects.exclude(file_delete_state=FileDeleteState.DONE).count() == 0
