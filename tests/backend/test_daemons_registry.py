import django_rq
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from backend.daemons import run_pass
from backend.models import (
    AssimilateState,
    DaemonStatus,
    ErrorMask,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.factories import NOW, AppFactory, FileFactory, HostFactory, ResultFactory, WorkunitFactory, demo_project


def make_result(*, deadline, state=ServerState.IN_PROGRESS, name="wu_0"):
    """A result sent 100 s before its ``deadline``, of a workunit with BOINC's all-1 limits."""
    # The scheduler lowers the workunit's transition_time to the deadline when it sends.
    wu = WorkunitFactory(
        name=name, transition_time=deadline, max_error_results=1, max_total_results=1, max_success_results=1
    )
    return ResultFactory(
        workunit=wu,
        name=f"{name}_0",
        server_state=state,
        host=HostFactory(),
        report_deadline=deadline,
        sent_time=deadline - 100,
    )


@pytest.mark.django_db
def test_it_times_out_result_past_deadline_with_an_event():
    late = make_result(deadline=NOW - 1, name="wu_0")
    on_time = make_result(deadline=NOW + 1, name="wu_1")
    assert run_pass("transitioner", project=demo_project(), now=NOW) == 1
    late.refresh_from_db()
    on_time.refresh_from_db()
    assert (late.server_state, late.outcome) == (ServerState.OVER, Outcome.NO_REPLY)
    assert on_time.server_state == ServerState.IN_PROGRESS
    # With BOINC's all-1 defaults one timeout errors the workunit (reference/server.md §1.7).
    assert late.workunit.error_mask == ErrorMask.TOO_MANY_TOTAL_RESULTS
    events = LifecycleEvent.objects.filter(result=late).order_by("field")
    assert [(e.field, e.old_label, e.new_label, e.actor) for e in events] == [
        ("outcome", "INIT", "NO_REPLY", "transitioner"),
        ("server_state", "IN_PROGRESS", "OVER", "transitioner"),
    ]
    status = DaemonStatus.objects.get(name="transitioner")
    assert (status.passes, status.last_work_done, status.total_work_done) == (1, 1, 1)


@pytest.mark.django_db
def test_a_second_pass_finds_nothing_more_to_time_out():
    make_result(deadline=NOW - 1)
    assert run_pass("transitioner", project=demo_project(), now=NOW) == 1
    events = LifecycleEvent.objects.count()
    assert run_pass("transitioner", project=demo_project(), now=NOW) == 0
    assert LifecycleEvent.objects.count() == events


def six_due(project, daemon):
    """Six items for ``daemon``, with consecutive ids; returns a function telling how many of
    them it has done."""
    if daemon == "work_generator":
        apps = AppFactory.create_batch(6, unsent_target=1)
        return lambda: Workunit.objects.filter(app__in=apps).values("app").distinct().count()
    if daemon == "file_deleter":
        wus = [project.workunit(file_delete_state=FileDeleteState.READY) for _ in range(6)]
        for wu in wus:
            project.result(
                wu, server_state=ServerState.OVER, outcome=Outcome.NO_REPLY, file_delete_state=FileDeleteState.READY
            )
        return lambda: (
            Workunit.objects.filter(file_delete_state=FileDeleteState.DONE).count()
            + Result.objects.filter(file_delete_state=FileDeleteState.DONE).count()
        )
    fields = {
        "transitioner": dict(transition_time=NOW - 1),
        "validator": dict(need_validate=True),
        "assimilator": dict(assimilate_state=AssimilateState.READY, error_mask=ErrorMask.TOO_MANY_ERROR_RESULTS),
    }[daemon]
    wus = [project.workunit(**fields) for _ in range(6)]
    if daemon == "validator":
        for wu in wus:
            r = project.result(wu, server_state=ServerState.OVER, outcome=Outcome.SUCCESS)
            FileFactory(result=r, md5_cksum="a")
    return {
        "transitioner": lambda: Result.objects.filter(server_state=ServerState.UNSENT).count(),
        "validator": lambda: Result.objects.filter(validate_state=ValidateState.VALID).count(),
        "assimilator": lambda: Workunit.objects.filter(assimilate_state=AssimilateState.DONE).count(),
    }[daemon]


@pytest.mark.parametrize(
    "daemon, per_index",
    [
        ("transitioner", 2),
        ("validator", 2),
        ("assimilator", 2),
        ("work_generator", 2),
        ("file_deleter", 4),  # two results and two workunits
    ],
)
def test_mod_and_index_split_the_work_between_instances_of_every_daemon(project, daemon, per_index):
    done_so_far = six_due(project, daemon)
    done = []
    for index in range(3):
        done.append(run_pass(daemon, project=demo_project(), now=NOW, mod=3, index=index))
        assert done_so_far() == (index + 1) * per_index
    assert done == [per_index] * 3
    assert done_so_far() == 3 * per_index
    assert [run_pass(daemon, project=demo_project(), now=NOW, mod=3, index=i) for i in range(3)] == [0, 0, 0]


@pytest.mark.django_db
def test_a_disabled_daemon_does_nothing():
    make_result(deadline=NOW - 1)
    DaemonStatus.objects.create(project=demo_project(), name="transitioner", enabled=False)
    assert run_pass("transitioner", project=demo_project(), now=NOW) == 0
    assert Result.objects.get().server_state == ServerState.IN_PROGRESS


@pytest.mark.django_db
def test_run_daemon_once_prints_the_work_done(capsys):
    make_result(deadline=1)  # long past on the wall clock
    call_command("run_daemon", "transitioner", "--once")
    assert capsys.readouterr().out.strip() == "transitioner: 1"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "argv, message",
    [
        (["nosuch", "--once"], "unknown daemon 'nosuch'"),
        (["transitioner", "--once", "--mod", "2", "--index", "2"], "--index must be in 0..1"),
        (["transitioner", "--once", "--batch-size", "0"], "--batch-size must be at least 1"),
    ],
)
def test_run_daemon_rejects_bad_arguments(argv, message):
    with pytest.raises(CommandError, match=message) as info:
        call_command("run_daemon", *argv)
    assert info.value.returncode == 2


@pytest.mark.django_db(transaction=True)
def test_a_daemon_pass_makes_the_round_trip_through_a_real_rq_worker(redis_client):
    result = make_result(deadline=NOW - 1)
    queue = django_rq.get_queue("default")
    job = queue.enqueue("backend.jobs.run_daemon_pass", "transitioner", project="demo", now=NOW)
    worker = django_rq.get_worker("default")
    assert worker.work(burst=True)
    job.refresh()
    assert job.is_finished, job.latest_result()
    assert job.return_value() == 1
    result.refresh_from_db()
    assert (result.server_state, result.outcome) == (ServerState.OVER, Outcome.NO_REPLY)
    assert LifecycleEvent.objects.filter(result=result).count() == 2
