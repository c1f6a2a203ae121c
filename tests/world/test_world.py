"""The volunteer world end to end (issue 5's tests): populations driving every daemon."""

import io
import json
import re
import time

import django_rq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, transaction

from backend.models import AssimilateState, Outcome, Result, ValidateState, Workunit
from tests.factories import WorldFactory
from tests.world.prefs import edit_prefs
from world import jobs
from world.models import World
from world.report import summary
from world.simulation import Simulation, WorldSettings

pytestmark = pytest.mark.django_db(transaction=True)

# A world whose test is about its runs (the same seed, the RQ chain of slices, the command, a
# host that vanishes) rather than about the work: a cushion of 8 unsent results instead of two
# files' worth (160), so a few hosts drain the little work left in two or three simulated days
# rather than a week of daemon rounds, through the same paths.
SMALL_CUSHION = {"cushion": 8}


def run_world(prefix="t", **values):
    sim = Simulation(WorldSettings(**values), prefix=prefix)
    sim.setup()
    sim.run()
    return sim, summary(sim)


def assert_healthy(figures):
    failed = [name for name, ok in figures["invariants"].items() if not ok]
    assert not failed, failed
    wus = figures["workunits"]
    assert wus["total"] > 0
    assert wus["assimilated"] == wus["total"]
    assert wus["with_canonical_result"] + wus["errored"] >= wus["total"]


@pytest.mark.parametrize(
    "hosts, days, successes",
    [
        # 20 hosts for a day still walk every path a workunit can take: jobs succeed, fail on
        # the client, go unreported and time out, are sent again, and the drain after the day
        # runs the last ones past their deadlines (seed 1: 320 successes, 3 client errors, 4 no
        # replies); the invariants are checked on every row all the same.
        pytest.param(20, 1, 250, id="20-hosts-1-day"),
        pytest.param(200, 3, 1000, marks=pytest.mark.long, id="200-hosts-3-days"),
    ],
)
def test_a_world_ends_with_every_workunit_assimilated_or_errored(hosts, days, successes):
    sim, figures = run_world(hosts=hosts, days=days, seed=1)
    assert_healthy(figures)
    assert figures["results"]["outcome"]["SUCCESS"] > successes
    assert figures["results"]["outcome"]["CLIENT_ERROR"] > 0
    assert figures["results"]["outcome"]["NO_REPLY"] > 0
    assert figures["simulated_seconds"] >= days * 86400


def test_error_prone_and_wrong_output_hosts_never_make_a_wrong_output_canonical():
    sim, figures = run_world(hosts=60, days=1.5, seed=3, error_prone_fraction=0.2, wrong_output_fraction=0.05)
    assert_healthy(figures)
    assert figures["results"]["outcome"]["CLIENT_ERROR"] > 20
    assert sim.wrong_checksums, "the wrong-output hosts computed something"
    assert figures["invariants"]["wrong_outputs_never_canonical"]
    # The wrong outputs themselves, not just the client errors, were judged INVALID: each one
    # the validator looked at, and none became canonical or VALID.
    wrong = Result.objects.filter(app_id=sim.app_id, name__in=sim.wrong_results)
    assert wrong.count() == len(sim.wrong_results) > 0
    assert not wrong.filter(outcome=Outcome.CLIENT_ERROR).exists()
    validated = wrong.filter(outcome__in=[Outcome.SUCCESS, Outcome.VALIDATE_ERROR])
    assert validated.filter(validate_state=ValidateState.INVALID).exists()
    assert not validated.exclude(
        validate_state__in=[ValidateState.INVALID, ValidateState.NO_CHECK, ValidateState.TOO_LATE]
    ).exists()
    assert not Workunit.objects.filter(canonical_result__in=wrong).exists()


def test_a_host_that_vanishes_mid_job_gets_no_reply_and_a_retry_completes():
    sim = Simulation(
        WorldSettings(
            hosts=3,
            days=0.5,
            seed=7,
            min_quorum=1,
            target_nresults=1,
            max_success_results=2,
            error_rate=0,
            no_reply_rate=0,
            leave_per_day=0,
            join_per_day=0,
            on_frac_min=1.0,
            delay_bound=86400,
            **SMALL_CUSHION,
        ),
        prefix="v",
    )
    sim.setup()
    sim.run_until(3600)
    victim = next(h for h in sim.hosts if h.running["cpu"])
    held = [job.name for job in victim.running["cpu"] + victim.queued["cpu"]]
    sim.host_leaves(victim.index, at=sim.t + 60)
    sim.run()
    gone = Result.objects.filter(name__in=held)
    assert set(gone.values_list("outcome", flat=True)) == {Outcome.NO_REPLY}
    for result in gone:
        wu = Workunit.objects.get(pk=result.workunit_id)
        assert wu.assimilate_state == AssimilateState.DONE
        canonical = wu.canonical_result
        assert canonical.host_id != victim.host_id and canonical.outcome == Outcome.SUCCESS
        assert canonical.id > result.id  # the retry
    assert_healthy(summary(sim))


@pytest.mark.parametrize("locality", [False, True])
def test_same_seed_same_outcome(locality):
    # Each world is new in the same database, so its hosts, files and results have other ids.
    _, first = run_world(prefix="a", hosts=12, days=0.5, seed=5, locality=locality, **SMALL_CUSHION)
    _, second = run_world(prefix="b", hosts=12, days=0.5, seed=5, locality=locality, **SMALL_CUSHION)
    _, other = run_world(prefix="c", hosts=12, days=0.5, seed=6, locality=locality, **SMALL_CUSHION)
    assert first == second
    assert other != first


def test_hosts_join_and_leave_with_churn_and_a_leavers_results_end_no_reply():
    sim, figures = run_world(prefix="ch", hosts=20, days=0.75, seed=8, join_per_day=0.5, leave_per_day=0.5)
    assert_healthy(figures)
    assert figures["hosts_joined"] > 0 and figures["hosts_left"] > 0
    joined = [h.host_id for h in sim.hosts if h.join_time > 0]
    assert len(joined) == figures["hosts_joined"]
    assert Result.objects.filter(host_id__in=joined, outcome=Outcome.SUCCESS).exists()
    left = Result.objects.filter(name__in=sim.abandoned)
    assert left.count() == len(sim.abandoned) > 0
    assert set(left.values_list("outcome", flat=True)) == {Outcome.NO_REPLY}


def test_a_host_uses_preferences_edited_mid_world_from_its_next_rpc(django_user_model):
    sim = Simulation(
        WorldSettings(
            hosts=3,
            days=1,
            seed=11,
            ncpus_choices=(4,),
            ncpus_weights=(1.0,),
            gpu_fraction=0,
            on_frac_min=1.0,
            leave_per_day=0,
            join_per_day=0,
            error_rate=0,
            no_reply_rate=0,
        ),
        prefix="pf",
    )
    sim.setup()
    asked = []
    request = sim.request

    def recording(host):
        made = request(host)
        asked.append((sim.t, host.index, made, host.work_seconds("cpu")))
        return made

    sim.request = recording
    sim.run_until(6 * 3600)
    host = sim.hosts[0]
    assert len(host.running["cpu"]) == 4
    old_most = (0.25 + 0.5) * 86400 * 4  # the most the world's buffer ever asks for
    assert all(made.cpu_req_secs <= old_most for _, _, made, _ in asked)
    owner = django_user_model.objects.create(username="owner")
    edit_prefs(host.host_id, owner, work_buf_min_days=2, work_buf_additional_days=1, max_ncpus_pct=50)
    edited_at = sim.t
    sim.run_until(edited_at + 3600)
    assert len(host.running["cpu"]) == 2  # half of its 4 CPUs
    t, _, made, queued = next(entry for entry in asked if entry[1] == host.index and entry[0] >= edited_at)
    assert t == edited_at  # the buffer fell below 2 days: the host asked at once
    assert made.cpu_req_secs == pytest.approx(max(3 * 86400 - queued, 0) * 2)
    assert made.cpu_req_secs > old_most
    assert made.cpu_req_instances == 0  # both allowed CPUs are busy
    others = [made for t, index, made, _ in asked if index != host.index]
    assert all(made.cpu_req_secs <= old_most for made in others)


def test_locality_scheduling_downloads_less_than_plain_scheduling_on_the_same_seed():
    _, plain = run_world(prefix="p", hosts=40, days=1, seed=2)
    _, local = run_world(prefix="l", hosts=40, days=1, seed=2, locality=True)
    assert_healthy(plain)
    assert_healthy(local)
    # Locality sends a host more results of the files it holds before it fetches another
    # (§3.10), so it downloads less per result; how much less depends on the generator's
    # batch per trigger and the population, and is stated with the bench figures.
    assert local["bytes_downloaded_per_result"] < plain["bytes_downloaded_per_result"]
    assert local["results_per_file_per_host"] > plain["results_per_file_per_host"]
    assert local["invariants"]["results_sent_in_increasing_id_per_user_and_file"]


def commit_durability():
    """SQLite's ``synchronous`` (0 is off) or PostgreSQL's ``synchronous_commit``."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous" if connection.vendor == "sqlite" else "SHOW synchronous_commit")
        return cursor.fetchone()[0]


@pytest.fixture
def durable_commits():
    """This connection waits for the disk at each commit, as a deployed database does (the test
    database on PostgreSQL does not: tests/conftest.py), so that a block that stops it shows."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit TO on")
    assert commit_durability() not in (0, "off")


@pytest.mark.database  # SQLite's PRAGMA synchronous or PostgreSQL's synchronous_commit
def test_commits_are_unsynced_inside_the_block_and_as_before_after_it_even_after_an_error(durable_commits):
    before = commit_durability()
    with pytest.raises(RuntimeError):
        with jobs.unsynced_commits():
            assert commit_durability() in (0, "off")
            raise RuntimeError("a failing slice")
    assert commit_durability() == before


@pytest.mark.database
def test_inside_a_transaction_the_block_leaves_the_setting_alone(durable_commits):
    before = commit_durability()
    with transaction.atomic(), jobs.unsynced_commits():
        assert commit_durability() == before


def test_world_command_prints_the_contract_keys(durable_commits):
    out = io.StringIO()
    durability = commit_durability()
    call_command("world", "--hosts", "8", "--days", "0.5", "--seed", "4", "--set", "cushion=8", "--json", stdout=out)
    assert commit_durability() == durability  # unsynced commits end with the run
    figures = json.loads(out.getvalue())
    for key in ("workunits", "results", "bytes_downloaded", "invariants", "simulated_seconds"):
        assert key in figures
    assert set(figures["results"]) >= {"server_state", "outcome", "validate_state"}
    assert all(figures["invariants"].values())
    assert World.objects.get().status == World.Status.FINISHED


def test_world_command_names_each_world_by_its_id_and_what_it_was_run_with():
    argv = ["--hosts", "3", "--days", "0.05", "--seed", "4", "--set", "cushion=8"]
    call_command("world", *argv, stdout=io.StringIO())
    call_command("world", *argv, "--locality", stdout=io.StringIO())
    first, second = World.objects.order_by("id")
    assert first.name == f"world {first.pk}: 3 hosts, 0.05 days, seed 4, cushion"
    assert second.name == f"world {second.pk}: 3 hosts, 0.05 days, seed 4, locality, cushion"
    # their projects, which /projects/ lists, take the names
    assert (first.project.name, second.project.name) == (first.name, second.name)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "nonsense"], "--set takes NAME=VALUE"),
        (["--set", "colour=blue"], "unknown world setting(s): colour"),
        (["--hosts", "0"], "hosts must be at least 1"),
        (["--set", "error_rate=2"], "error_rate must be between 0 and 1"),
        (["--set", "mt_threads=1"], "mt_threads must be a whole number, 2 or more, not 1"),
        (["--set", "mt_efficiency_min=0"], "mt_efficiency_min must be above 0 and at most 1"),
        (["--set", "gpu_gflops_sigma=-1"], "gpu_gflops_sigma must be 0 or more"),
    ],
)
def test_world_command_refuses_bad_input_with_exit_status_2(args, message):
    with pytest.raises(CommandError, match=re.escape(message)) as info:
        call_command("world", *args, stdout=io.StringIO())
    assert info.value.returncode == 2
    assert not World.objects.exists()


def run_queue(queue, until, timeout=300, chains=1):
    """Work ``queue`` in bursts on the test Redis until ``until()``; a chained slice enqueued
    for later (``enqueue_in``) is moved to the queue, as the RQ scheduler would at its time.
    ``chains`` worlds run at once, each one chained job at a time.
    Fails, naming the failed jobs' errors, when the chain breaks (``until()`` is still false
    with nothing queued or scheduled) or after ``timeout`` seconds of bursts.
    Returns the finished jobs in the order they ran."""
    worker = django_rq.get_worker(queue.name)
    scheduled = queue.scheduled_job_registry
    deadline = time.monotonic() + timeout
    while not until():
        for job_id in scheduled.get_job_ids():
            scheduled.requeue(job_id)
        waiting = queue.get_job_ids()
        assert len(waiting) <= chains, "a world runs one chained job at a time"
        assert waiting, f"the chain stopped before the world did; {failed_jobs(queue)}"
        assert time.monotonic() < deadline, f"still running after {timeout} s of bursts"
        worker.work(burst=True)
    finished = [queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()]
    return sorted(finished, key=lambda job: job.ended_at)


def failed_jobs(queue):
    errors = []
    for job_id in queue.failed_job_registry.get_job_ids():
        result = queue.fetch_job(job_id).latest_result()
        errors.append(result.exc_string if result else f"{job_id}: no result")
    return "failed jobs:\n" + "\n".join(errors) if errors else "no job failed"


def test_rq_jobs_run_one_slice_each_chained_and_end_exactly_like_one_run(redis_client):
    whole = WorldFactory(name="whole", hosts=8, days=0.5, seed=9, settings=SMALL_CUSHION)
    expected = jobs.run_in_process(whole)
    sliced = WorldFactory(name="sliced", hosts=8, days=0.5, seed=9, speedup=7200, settings=SMALL_CUSHION)
    assert jobs.start(sliced.pk)  # autocommit: the first slice is enqueued at once
    queue = django_rq.get_queue(jobs.QUEUE)
    ran = run_queue(queue, lambda: World.objects.get(pk=sliced.pk).status != World.Status.RUNNING)
    sliced.refresh_from_db()
    assert sliced.status == World.Status.FINISHED, sliced.error
    clocks = [job.return_value() for job in ran]
    assert len(clocks) > 3
    slice_seconds = 7200 * jobs.SLICE_WALL_SECONDS
    assert all(0 < b - a <= slice_seconds for a, b in zip(clocks[:-2], clocks[1:-1]))
    assert sliced.summary == expected


def test_pause_stops_the_chain_and_start_resumes_it(redis_client):
    # slices of 8 simulated hours: the first leaves the world draining, a handful end it
    world = WorldFactory(name="w", hosts=4, days=0.25, seed=1, speedup=14400, settings=SMALL_CUSHION)
    queue = django_rq.get_queue(jobs.QUEUE)
    assert jobs.start(world.pk)
    assert not jobs.start(world.pk)  # already running
    django_rq.get_worker(jobs.QUEUE).work(burst=True, max_jobs=1)
    clock = World.objects.get(pk=world.pk).clock
    assert clock > 0
    assert jobs.pause(world.pk)
    assert not jobs.pause(world.pk)
    run_queue(
        queue, lambda: not queue.get_job_ids() and not queue.scheduled_job_registry.get_job_ids()
    )  # the queued slice finds the world paused and chains nothing
    paused = World.objects.get(pk=world.pk)
    assert (paused.status, paused.clock) == (World.Status.PAUSED, clock)
    assert jobs.start(world.pk)
    run_queue(queue, lambda: World.objects.get(pk=world.pk).status != World.Status.RUNNING)
    resumed = World.objects.get(pk=world.pk)
    assert resumed.status == World.Status.FINISHED
    assert resumed.summary["simulated_seconds"] > clock
    assert all(resumed.summary["invariants"].values())


def test_a_chain_superseded_by_pause_and_resume_runs_nothing(redis_client):
    # Paused and resumed before the old chain's queued slice ran: two jobs wait, and only the
    # new chain's advances the world, so no slice is simulated twice.
    world = WorldFactory(name="w", hosts=4, days=0.25, seed=1, speedup=3600, settings=SMALL_CUSHION)
    queue = django_rq.get_queue(jobs.QUEUE)
    assert jobs.start(world.pk)
    assert jobs.pause(world.pk)
    assert jobs.start(world.pk)
    assert len(queue.get_job_ids()) == 2
    django_rq.get_worker(jobs.QUEUE).work(burst=True, max_jobs=2)
    ran = sorted(
        (queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()), key=lambda job: job.ended_at
    )
    assert [job.return_value() is None for job in ran] == [True, False]
    assert World.objects.get(pk=world.pk).clock == ran[1].return_value()
    chained = queue.get_job_ids() + queue.scheduled_job_registry.get_job_ids()
    assert len(chained) == 1


def test_a_slice_waits_while_another_slice_holds_the_world(redis_client):
    world = WorldFactory(name="w", hosts=4, days=0.25, seed=1, speedup=3600, settings=SMALL_CUSHION)
    queue = django_rq.get_queue(jobs.QUEUE)
    held = redis_client.lock(jobs.lock_key(world.pk), timeout=60)
    assert held.acquire(blocking=False)
    assert jobs.start(world.pk)
    worker = django_rq.get_worker(jobs.QUEUE)
    worker.work(burst=True, max_jobs=1)
    assert World.objects.get(pk=world.pk).clock == 0
    retry = queue.scheduled_job_registry.get_job_ids()
    assert len(retry) == 1 and not queue.get_job_ids()
    held.release()
    queue.scheduled_job_registry.requeue(retry[0])
    worker.work(burst=True, max_jobs=1)
    assert World.objects.get(pk=world.pk).clock > 0


def test_a_day_with_homogeneous_redundancy_never_mixes_hr_classes_in_a_quorum():
    from backend.daemons.hr import FINE, hr_class, hr_unknown_class

    sim, figures = run_world(
        prefix="hr",
        hosts=60,
        days=1,
        seed=5,
        homogeneous_redundancy=FINE,
        error_prone_fraction=0.3,
        leave_per_day=0,
        join_per_day=0,
    )
    assert_healthy(figures)
    classes = {
        h.host_id: (
            None
            if hr_unknown_class(h.os_name, h.p_vendor, h.p_model, FINE)
            else hr_class(h.os_name, h.p_vendor, h.p_model, FINE)
        )
        for h in sim.hosts
    }
    assert len(set(classes.values()) - {None}) == 5
    sent = Result.objects.filter(app_id=sim.app_id, host__isnull=False)
    # hosts of no known class were sent nothing
    assert not sent.filter(host_id__in=[h for h, c in classes.items() if c is None]).exists()
    quorums = {}
    for wu_id, host_id in sent.filter(outcome=Outcome.SUCCESS).values_list("workunit_id", "host_id"):
        quorums.setdefault(wu_id, set()).add(classes[host_id])
    assert len(quorums) > 100
    mixed = {wu: found for wu, found in quorums.items() if len(found) > 1}
    assert not mixed
    # each workunit that was sent stays committed to the class of its successes
    committed = dict(Workunit.objects.filter(pk__in=quorums).values_list("id", "hr_class"))
    assert all(committed[wu] == next(iter(found)) for wu, found in quorums.items())
    # and errors did un-commit some workunits, whose retries went to another class
    seen = {}
    for wu_id, host_id in sent.values_list("workunit_id", "host_id"):
        seen.setdefault(wu_id, set()).add(classes[host_id])
    assert any(len(found) > 1 for found in seen.values())


def test_hosts_short_of_disk_are_told_to_delete_files_and_never_hold_more_than_two():
    """sched_locality rule 11: with 0.95 GiB for BOINC, a 16 MiB file held and jobs whose
    rsc_disk_bound is 1e9 bytes, a host has room for one job while it holds one file
    (0.95 × 2^30 − 2^24 ≥ 1e9) and for none with two (− 2^25 < 1e9): such a request gets no
    job and is told to delete one, so it never takes a third file."""
    sim, figures = run_world(prefix="disk", hosts=20, days=0.5, seed=3, locality=True, small_disk_fraction=0.5)
    assert_healthy(figures)
    small = [h for h in sim.hosts if h.disk_gb]
    assert 5 <= len(small) <= 15
    assert figures["disk_deletions"] > 0
    assert all(len(h.files) <= 2 for h in small)
    # and they still compute: their jobs come one per request
    assert Result.objects.filter(host_id__in=[h.host_id for h in small], outcome=Outcome.SUCCESS).count() >= len(small)
