"""Several worker processes per daemon on PostgreSQL: nothing lost, nothing done twice."""

import multiprocessing
import os
import signal
import time

import pytest
from django.contrib.auth import get_user_model
from django.db import connections

from backend.daemons import get_daemon
from backend.models import (
    App, AssimilatedResult, AssimilateState, File, FileDeleteState, Host, LifecycleEvent,
    Outcome, Result, ServerState, ValidateState, Workunit, name_random,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

DAEMONS = ["transitioner", "validator", "assimilator", "file_deleter"]
WORKUNITS = 10_000
CREDIT_PER_RESULT = 3600e9 * 200 / 86400e9


def finished_workunits(n, data_dir):
    """``n`` workunits whose one result came back SUCCESS, all due for the transitioner."""
    (data_dir / "upload").mkdir(exist_ok=True)
    (data_dir / "download").mkdir(exist_ok=True)
    now = int(time.time()) - 1000
    app = App.objects.create(name="concurrency", min_quorum=1, target_nresults=1,
                             max_error_results=1, max_total_results=2, max_success_results=1)
    host = Host.objects.create(owner=get_user_model().objects.create(username="v"),
                               domain_name="h")
    wus = Workunit.objects.bulk_create(
        Workunit(app=app, name=f"wu{i}", transition_time=now, min_quorum=1, target_nresults=1,
                 max_error_results=1, max_total_results=2, max_success_results=1)
        for i in range(n))
    results = Result.objects.bulk_create(
        Result(workunit=wu, app=app, name=f"wu{wu.pk}_0", random=name_random(f"wu{wu.pk}_0"),
               server_state=ServerState.OVER, outcome=Outcome.SUCCESS, host=host,
               sent_time=now - 100, received_time=now, report_deadline=now + 86400)
        for wu in wus)
    File.objects.bulk_create(File(name=r.output_file_name(0), kind="output", result=r,
                                  md5_cksum="0" * 32) for r in results)
    return host


def worker(name, idle_limit):
    """A daemon process: passes at the wall clock until ``idle_limit`` idle passes in a row."""
    connections.close_all()
    run_once, idle = get_daemon(name), 0
    while idle < idle_limit:
        done = run_once(now=int(time.time()), batch_size=100)
        idle = 0 if done else idle + 1
        if not done:
            time.sleep(0.1)
    connections.close_all()


def start_workers(per_daemon, idle_limit):
    connections.close_all()
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=worker, args=(name, idle_limit))
                 for name in DAEMONS for _ in range(per_daemon)]
    for process in processes:
        process.start()
    return processes


def assert_each_done_exactly_once(n, host):
    assert Workunit.objects.count() == n
    assert Workunit.objects.exclude(assimilate_state=AssimilateState.DONE).count() == 0
    assert Workunit.objects.exclude(file_delete_state=FileDeleteState.DONE).count() == 0
    assert Result.objects.exclude(validate_state=ValidateState.VALID).count() == 0
    assert Result.objects.exclude(file_delete_state=FileDeleteState.DONE).count() == 0
    assert Result.objects.count() == n       # no replica made twice
    assert AssimilatedResult.objects.count() == n
    for field, new in (("assimilate_state", AssimilateState.DONE),
                       ("validate_state", ValidateState.VALID)):
        events = LifecycleEvent.objects.filter(field=field, new=new)
        assert events.count() == n, field
    host.refresh_from_db()
    assert host.total_credit == pytest.approx(n * CREDIT_PER_RESULT)


def test_four_workers_per_daemon_do_every_workunit_exactly_once(postgres_only, data_dirs):
    host = finished_workunits(WORKUNITS, data_dirs)
    processes = start_workers(4, idle_limit=40)
    for process in processes:
        process.join(timeout=600)
        assert process.exitcode == 0
    assert_each_done_exactly_once(WORKUNITS, host)


def test_a_worker_killed_mid_pass_loses_nothing_and_the_next_passes_converge(
        postgres_only, data_dirs):
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
    while sum(get_daemon(name)(now=now, batch_size=1000) for name in DAEMONS):
        now, rounds = max(now + 1, int(time.time()) + 2), rounds + 1
        assert rounds < 100, "the passes do not converge"
    assert_each_done_exactly_once(n, host)
