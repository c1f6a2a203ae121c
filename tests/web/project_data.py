"""Rows for the project page tests: an app, hosts, workunits with results and events."""

import pytest
from django.contrib.auth import get_user_model

from backend.events import event, record
from backend.models import (
    App,
    AppVersion,
    GpuType,
    Host,
    HostFile,
    Outcome,
    Result,
    ServerState,
    ValidateState,
    Workunit,
)

NOW = 1_700_000_000


def make_workunits(app, n, *, start=0, **fields):
    fields.setdefault("transition_time", NOW + 3600)
    return Workunit.objects.bulk_create(
        Workunit(app=app, name=f"wu_{start + i:05d}", create_time=NOW, **fields)
        for i in range(n)
    )


def make_results(wu, states, *, host=None, app_version=None):
    """One result per (server_state, outcome, validate_state) in ``states``."""
    return Result.objects.bulk_create(
        Result(workunit=wu, app=wu.app, name=f"{wu.name}_{k}", create_time=NOW,
               server_state=s, outcome=o, validate_state=v, host=host,
               user=host.owner if host else None, app_version=app_version,
               sent_time=NOW + 10 if s >= ServerState.IN_PROGRESS else 0)
        for k, (s, o, v) in enumerate(states)
    )


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user("owner", password="pw-owner-1")


@pytest.fixture
def stranger(db):
    return get_user_model().objects.create_user("stranger", password="pw-stranger-1")


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_user("staff", password="pw-staff-1", is_staff=True)


@pytest.fixture
def app(db):
    return App.objects.create(name="einstein", min_quorum=1, target_nresults=1,
                              max_error_results=1, max_total_results=1, max_success_results=1)


@pytest.fixture
def versions(app):
    cpu = AppVersion.objects.create(app=app, version_num=100)
    gpu = AppVersion.objects.create(app=app, version_num=100, plan_class="cuda",
                                    gpu_type=GpuType.NVIDIA, gpu_usage=1)
    return cpu, gpu


@pytest.fixture
def host(owner):
    host = Host.objects.create(owner=owner, domain_name="owners-box", p_ncpus=4)
    HostFile.objects.create(host=host, name="sticky_input_1.dat", reported_time=NOW)
    return host


@pytest.fixture
def busy_workunit(app, host, versions):
    """A workunit with a valid result, one in progress on a GPU, one unsent, and their events."""
    wu = make_workunits(app, 1, need_validate=True)[0]
    valid, running, unsent = make_results(wu, [
        (ServerState.OVER, Outcome.SUCCESS, ValidateState.VALID),
        (ServerState.IN_PROGRESS, Outcome.INIT, ValidateState.INIT),
        (ServerState.UNSENT, Outcome.INIT, ValidateState.INIT),
    ], host=host, app_version=versions[1])
    record([
        event(time=NOW + 10, actor="scheduler", result_id=valid.id, workunit_id=wu.id,
              field="server_state", old=ServerState.UNSENT, new=ServerState.IN_PROGRESS),
        event(time=NOW + 20, actor="scheduler", result_id=valid.id, workunit_id=wu.id,
              field="server_state", old=ServerState.IN_PROGRESS, new=ServerState.OVER),
        event(time=NOW + 20, actor="scheduler", result_id=valid.id, workunit_id=wu.id,
              field="outcome", old=Outcome.INIT, new=Outcome.SUCCESS),
        event(time=NOW + 30, actor="validator", result_id=valid.id, workunit_id=wu.id,
              field="validate_state", old=ValidateState.INIT, new=ValidateState.VALID),
        event(time=NOW + 25, actor="transitioner", workunit_id=wu.id,
              field="need_validate", old=0, new=1, reason="a success to validate"),
    ])
    return wu
