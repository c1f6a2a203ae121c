"""Random host behaviour through every daemon until quiet, checking DESIGN.md's invariants.

Each example is a small project (two workunits) and a list of host behaviours, one per job
sent: success, client error, wrong output, no reply, or a reply after the report deadline
(accepted late, reference/server.md §3.5). Jobs beyond the list succeed. The driver steps a
simulated clock: each step delivers the late replies that are due, runs the daemons until they
find nothing, and lets fresh hosts fetch every unsent job, all at one clock reading. It stops
once nothing is left to do.
Each example runs in one transaction that is rolled back, so examples start from an empty
project without recreating the database.
"""

import tempfile
from pathlib import Path

import pytest
from django.db import transaction
from django.db.models import Count, Sum
from django.test.utils import override_settings
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from backend.daemons import get_daemon, work_generator
from backend.daemons.scheduler import ReportedFile, ReportedResult, handle_request
from backend.models import (
    AssimilateState,
    ClientState,
    Host,
    LifecycleEvent,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)
from tests.backend.conftest import Project, work_request
from tests.factories import NOW, demo_project

BEHAVIOURS = ["success", "client_error", "wrong_output", "no_reply", "late_reply"]
DAEMONS = ["transitioner", "validator", "assimilator", "file_deleter"]
DELAY_BOUND = 1000
STEP = DELAY_BOUND // 2
MAX_STEPS = 60


def run_daemons(now):
    """Rounds of every daemon at ``now`` until a round does nothing; returns the work done."""
    total = 0
    for _ in range(20):
        done = 0
        for name in DAEMONS:
            done += get_daemon(name)(project=demo_project(), now=now, batch_size=50)
            if name == "transitioner":
                stale = Result.objects.filter(server_state=ServerState.IN_PROGRESS, report_deadline__lt=now)
                assert not stale.exists(), "IN_PROGRESS past its deadline after a transitioner pass"
        total += done
        if not done:
            return total
    raise AssertionError(f"the daemons never went quiet at {now}")


def report(job, behaviour):
    if behaviour == "client_error":
        return ReportedResult(job.name, client_state=ClientState.COMPUTE_ERROR, exit_status=1)
    data = f"wrong {job.name}" if behaviour == "wrong_output" else job.wu_name
    return ReportedResult(
        job.name,
        final_elapsed_time=60,
        final_cpu_time=60,
        output_files=[ReportedFile(job.output_files[0].name, data=data.encode())],
    )


def deliver(host, rep, now):
    reply = handle_request(
        work_request(host, cpu_req_secs=0, cpu_req_instances=0, results=[rep]), project=demo_project(), now=now
    )
    assert reply.result_acks == [rep.name]
    assert not reply.results


def fetch_all(project, behaviours, late, now):
    """Fresh hosts fetch one job each until none is left; returns how many were sent."""
    sent = 0
    while True:
        host = project.host()
        reply = handle_request(work_request(host, cpu_req_secs=1, cpu_req_instances=0), project=demo_project(), now=now)
        if not reply.results:
            return sent
        for job in reply.results:
            sent += 1
            behaviour = behaviours.pop(0) if behaviours else "success"
            if behaviour == "late_reply":
                late.append((job.report_deadline + 1, host, report(job, "success")))
            elif behaviour != "no_reply":
                deliver(host, report(job, behaviour), now)


def play(project, behaviours, nworkunits):
    """Drive the pipeline until quiet; returns the number of clock steps taken."""
    now = NOW
    work_generator.create_work(project.app, [f"wu{i}" for i in range(nworkunits)], now=now)
    behaviours, late = list(behaviours), []
    for step in range(MAX_STEPS):
        now += STEP
        # Replies first, then the daemons, at one clock reading: a world's tick does both.
        busy = 0
        for due, host, rep in [entry for entry in late if entry[0] <= now]:
            deliver(host, rep, now)
            busy += 1
        late = [entry for entry in late if entry[0] > now]
        busy += run_daemons(now)
        busy += fetch_all(project, behaviours, late, now)
        if not busy and not late and not Result.objects.filter(server_state__lt=ServerState.OVER).exists():
            return step
    raise AssertionError(f"not quiet after {MAX_STEPS} steps of {STEP} s")


def check_invariants():
    for wu in Workunit.objects.annotate(n=Count("results")):
        assert wu.assimilate_state == AssimilateState.DONE or wu.error_mask, wu.name
        assert wu.n <= wu.max_total_results, wu.name
        for r in wu.results.all():
            expected = wu.canonical_credit if r.validate_state == ValidateState.VALID else 0.0
            assert r.granted_credit == pytest.approx(expected), r.name
            credited = LifecycleEvent.objects.filter(result=r, field="validate_state", new=ValidateState.VALID)
            assert credited.count() <= 1, r.name
    granted = Result.objects.aggregate(total=Sum("granted_credit"))["total"] or 0.0
    hosts = Host.objects.aggregate(total=Sum("total_credit"))["total"] or 0.0
    assert hosts == pytest.approx(granted)


@pytest.mark.django_db
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@example(behaviours=[], min_quorum=2)
@example(behaviours=["no_reply", "success", "late_reply", "success", "success"], min_quorum=2)
@given(behaviours=st.lists(st.sampled_from(BEHAVIOURS), max_size=10), min_quorum=st.integers(1, 2))
def test_random_hosts_leave_every_workunit_assimilated_or_in_error(behaviours, min_quorum):
    with (
        tempfile.TemporaryDirectory() as data,
        override_settings(
            BOINCWEB_DATA_DIR=Path(data), DOWNLOAD_DIR=Path(data) / "download", UPLOAD_DIR=Path(data) / "upload"
        ),
        transaction.atomic(),
    ):
        project = Project(
            min_quorum=min_quorum,
            target_nresults=min_quorum,
            max_error_results=2,
            max_total_results=5,
            max_success_results=3,
            delay_bound=DELAY_BOUND,
            rsc_fpops_est=1e11,
        )
        play(project, behaviours, nworkunits=2)
        check_invariants()
        transaction.set_rollback(True)
