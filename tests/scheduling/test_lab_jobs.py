"""A run never waits forever: each poll of a queued or running run looks at its RQ job on the
test Redis and fails the run, saying why, when the job failed, vanished, was stopped, or was
abandoned by a dead worker."""

from datetime import timedelta

import django_rq
import pytest
from django.db import OperationalError
from django.utils import timezone
from rq import SimpleWorker
from rq.executions import Execution
from rq.job import JobStatus

from scheduling import jobs
from scheduling.models import Run
from tests.factories import RunFactory
from tests.scheduling.test_lab_views import HX, stored, user  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(redis_client):
    return django_rq.get_queue(jobs.QUEUE)


def enqueued_run(stored, capture, **kw):  # noqa: F811
    run = RunFactory(scenario=stored, **kw)
    with capture(execute=True):
        jobs.enqueue_run(run)
    return run


def poll(client, run):
    response = client.get(f"/lab/runs/{run.pk}/", **HX)
    run.refresh_from_db()
    return response


def work_in_process(queue):
    """A burst of an in-process worker: it sees the test's transaction and its monkeypatches."""
    SimpleWorker([queue], connection=queue.connection).work(burst=True)


def test_a_new_run_stores_the_id_of_the_job_that_runs_it(stored, queue, django_capture_on_commit_callbacks):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)
    job = queue.fetch_job(run.job_id)
    assert job.func_name == "scheduling.jobs.run_simulation" and job.args == (run.pk,)
    assert Run.objects.get(pk=run.pk).job_id == run.job_id


def test_a_run_waiting_for_a_worker_keeps_polling(client, stored, queue, django_capture_on_commit_callbacks):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)
    response = poll(client, run)
    assert response.status_code == 200 and run.status == Run.Status.QUEUED
    assert "waiting for a worker" in response.content.decode()


def test_a_job_that_fails_outside_the_runs_own_error_handling_fails_the_run_on_the_next_poll(
    client, stored, queue, monkeypatch, django_capture_on_commit_callbacks
):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)

    def locked(self, now):
        raise OperationalError("database is locked")

    monkeypatch.setattr(Run, "mark_running", locked)
    work_in_process(queue)
    assert queue.fetch_job(run.job_id).get_status() == JobStatus.FAILED
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED, "the job itself could not mark it"
    response = poll(client, run)
    body = response.content.decode()
    assert response.status_code == 286 and 'data-testid="run-error"' in body
    assert run.status == Run.Status.FAILED and run.finished is not None
    assert run.error == "Its job failed: django.db.utils.OperationalError: database is locked"


def test_a_queued_run_whose_job_vanished_fails_once_the_grace_period_is_over(client, stored, redis_client):
    run = RunFactory(scenario=stored, job_id="lab-run-gone")
    assert poll(client, run).status_code == 200 and run.status == Run.Status.QUEUED
    Run.objects.filter(pk=run.pk).update(created=timezone.now() - jobs.LOST_AFTER - timedelta(seconds=1))
    response = poll(client, run)
    assert response.status_code == 286 and run.status == Run.Status.FAILED
    assert "no longer in the queue" in run.error and "no longer in the queue" in response.content.decode()


def test_a_running_run_whose_job_vanished_fails_at_once(client, stored, redis_client):
    run = RunFactory(scenario=stored, job_id="lab-run-gone", status=Run.Status.RUNNING)
    poll(client, run)
    assert run.status == Run.Status.FAILED and "no longer in the queue" in run.error


def test_a_stopped_job_fails_its_run(client, stored, queue, django_capture_on_commit_callbacks):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    queue.fetch_job(run.job_id).set_status(JobStatus.STOPPED)
    poll(client, run)
    assert run.status == Run.Status.FAILED and run.error == "Its job was stopped before the run ended."


def _started(queue, run, heartbeat_ttl):
    """The job as a worker leaves it when it takes it: started, with an execution in the
    started registry that lives `heartbeat_ttl` seconds unless the worker renews it."""
    job = queue.fetch_job(run.job_id)
    queue.remove(job)
    with queue.connection.pipeline() as pipe:
        job.set_status(JobStatus.STARTED, pipeline=pipe)
        Execution.create(job, heartbeat_ttl, pipeline=pipe, worker_name="gone")
        pipe.execute()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, started=timezone.now())


def test_a_run_whose_worker_died_mid_run_fails_when_its_heartbeat_expires(
    client, stored, queue, django_capture_on_commit_callbacks
):
    alive = enqueued_run(stored, django_capture_on_commit_callbacks)
    dead = enqueued_run(stored, django_capture_on_commit_callbacks)
    _started(queue, alive, heartbeat_ttl=90)
    _started(queue, dead, heartbeat_ttl=0)
    assert poll(client, alive).status_code == 200 and alive.status == Run.Status.RUNNING
    response = poll(client, dead)
    assert response.status_code == 286 and dead.status == Run.Status.FAILED
    assert "stopped answering" in dead.error


def test_a_job_that_ended_without_finishing_its_run_fails_it(client, stored, queue, django_capture_on_commit_callbacks):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)  # so the job skips it
    work_in_process(queue)
    poll(client, run)
    assert run.status == Run.Status.FAILED
    assert run.error == "Its job ended ('skipped') without finishing the run."


def test_a_run_finished_while_its_job_was_being_looked_at_keeps_its_result(
    client, stored, queue, django_capture_on_commit_callbacks
):
    run = enqueued_run(stored, django_capture_on_commit_callbacks)
    work_in_process(queue)
    run.refresh_from_db()
    assert run.status == Run.Status.DONE
    stale = Run.objects.get(pk=run.pk)
    stale.status = Run.Status.RUNNING  # what a page read just before the job finished
    assert jobs.check_job(stale, now=timezone.now()) is False
    assert Run.objects.get(pk=run.pk).status == Run.Status.DONE


def test_the_scenario_and_compare_pages_fail_lost_runs_too(client, stored, redis_client):
    old = timezone.now() - jobs.LOST_AFTER - timedelta(seconds=1)
    a = RunFactory(scenario=stored, job_id="lab-run-gone-a")
    b = RunFactory(scenario=stored, policy="boinc5", job_id="lab-run-gone-b")
    Run.objects.filter(pk__in=[a.pk, b.pk]).update(created=old)
    page = client.get(f"/lab/{stored.pk}/", **HX)
    assert page.status_code == 286 and "hx-trigger" not in page.content.decode()
    assert set(Run.objects.values_list("status", flat=True)) == {Run.Status.FAILED}
    Run.objects.filter(pk__in=[a.pk, b.pk]).update(status=Run.Status.QUEUED, error="", finished=None)
    compare = client.get(f"/lab/compare/?runs={a.pk},{b.pk}", **HX)
    assert compare.status_code == 286 and compare.content.decode().count('data-testid="run-error"') == 2
