"""Rows for the project page tests: an app, hosts, workunits with results and events."""

import pytest

from backend.events import event, record
from backend.models import GpuType, Outcome, ServerState, ValidateState
from tests.factories import (
    NOW,
    AppFactory,
    AppVersionFactory,
    HostFactory,
    HostFileFactory,
    ResultFactory,
    UserFactory,
    WorkunitFactory,
    demo_project,
)


def make_workunits(app, n, *, start=0, **fields):
    """``n`` workunits named wu_<start>, wu_<start + 1>, ..."""
    return [WorkunitFactory(app=app, name=f"wu_{start + i:05d}", **fields) for i in range(n)]


def make_results(wu, states, *, host=None, app_version=None):
    """One result per (server_state, outcome, validate_state) in ``states``; the ones sent
    went out 10 s after NOW."""
    return [
        ResultFactory(
            workunit=wu,
            name=f"{wu.name}_{k}",
            server_state=s,
            outcome=o,
            validate_state=v,
            host=host,
            app_version=app_version,
            create_time=NOW,
            sent_time=NOW + 10 if s >= ServerState.IN_PROGRESS else 0,
        )
        for k, (s, o, v) in enumerate(states)
    ]


@pytest.fixture
def owner(db):
    return UserFactory(username="owner", password="pw-owner-1")


@pytest.fixture
def stranger(db):
    return UserFactory(username="stranger", password="pw-stranger-1")


@pytest.fixture
def staff(db):
    return UserFactory(username="staff", password="pw-staff-1", is_staff=True)


@pytest.fixture
def app(db):
    return AppFactory(name="einstein", max_error_results=1, max_total_results=1, max_success_results=1)


@pytest.fixture
def versions(app):
    cpu = AppVersionFactory(app=app)
    gpu = AppVersionFactory(app=app, plan_class="cuda", gpu_type=GpuType.NVIDIA, gpu_usage=1)
    return cpu, gpu


@pytest.fixture
def host(owner):
    host = HostFactory(owner=owner, domain_name="owners-box", p_ncpus=4)
    HostFileFactory(host=host, name="sticky_input_1.dat")
    return host


@pytest.fixture
def busy_workunit(app, host, versions):
    """A workunit with a valid result, one in progress on a GPU, one unsent, and their events."""
    wu = make_workunits(app, 1, need_validate=True)[0]
    valid, running, unsent = make_results(
        wu,
        [
            (ServerState.OVER, Outcome.SUCCESS, ValidateState.VALID),
            (ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT),
            (ServerState.UNSENT, Outcome.INIT, ValidateState.INIT),
        ],
        host=host,
        app_version=versions[1],
    )
    record(
        [
            event(
                time=NOW + 10,
                actor="scheduler",
                result_id=valid.id,
                workunit_id=wu.id,
                field="server_state",
                old=ServerState.UNSENT,
                new=ServerState.IN_PROGRESS,
            ),
            event(
                time=NOW + 20,
                actor="scheduler",
                result_id=valid.id,
                workunit_id=wu.id,
                field="server_state",
                old=ServerState.IN_PROGRESS,
                new=ServerState.OVER,
            ),
            event(
                time=NOW + 20,
                actor="scheduler",
                result_id=valid.id,
                workunit_id=wu.id,
                field="outcome",
                old=Outcome.INIT,
                new=Outcome.SUCCESS,
            ),
            event(
                time=NOW + 30,
                actor="validator",
                result_id=valid.id,
                workunit_id=wu.id,
                field="validate_state",
                old=ValidateState.INIT,
                new=ValidateState.VALID,
            ),
            event(
                time=NOW + 25,
                actor="transitioner",
                workunit_id=wu.id,
                field="need_validate",
                old=0,
                new=1,
                reason="a success to validate",
            ),
        ],
        demo_project().pk,
    )
    return wu
