import pytest
from django.db import IntegrityError, transaction

from backend.models import (
    INT_MAX,
    AssimilateState,
    ClientState,
    ErrorMask,
    FileDeleteState,
    LifecycleEvent,
    Outcome,
    Result,
    ServerState,
    TransitionerFlags,
    ValidateState,
    state_label,
)
from tests.factories import (
    AppFactory,
    AppVersionFactory,
    HostFactory,
    ResultFactory,
    UserFactory,
    WorkunitFactory,
    demo_project,
)


def test_enum_values_are_boincs():
    """reference/server.md §1.1-§1.6, value for value."""
    assert {s.name: s.value for s in ServerState} == {"INACTIVE": 1, "UNSENT": 2, "IN_PROGRESS": 4, "OVER": 5}
    assert {s.name: s.value for s in Outcome} == {
        "INIT": 0,
        "SUCCESS": 1,
        "COULDNT_SEND": 2,
        "CLIENT_ERROR": 3,
        "NO_REPLY": 4,
        "DIDNT_NEED": 5,
        "VALIDATE_ERROR": 6,
        "CLIENT_DETACHED": 7,
    }
    assert {s.name: s.value for s in ValidateState} == {
        "INIT": 0,
        "VALID": 1,
        "INVALID": 2,
        "NO_CHECK": 3,
        "INCONCLUSIVE": 4,
        "TOO_LATE": 5,
    }
    assert [s.value for s in ClientState] == list(range(8))
    assert {s.name: s.value for s in FileDeleteState} == {"INIT": 0, "READY": 1, "DONE": 2, "ERROR": 3}
    assert {s.name: s.value for s in AssimilateState} == {"INIT": 0, "READY": 1, "DONE": 2}
    assert {s.name: s.value for s in ErrorMask} == {
        "COULDNT_SEND_RESULT": 1,
        "TOO_MANY_ERROR_RESULTS": 2,
        "TOO_MANY_SUCCESS_RESULTS": 4,
        "TOO_MANY_TOTAL_RESULTS": 8,
        "CANCELLED": 16,
        "NO_CANONICAL_RESULT": 32,
    }
    assert {s.name: s.value for s in TransitionerFlags} == {
        "ORDINARY": 0,
        "TRANSITION_NONE": 1,
        "TRANSITION_NO_NEW_RESULTS": 2,
    }
    assert INT_MAX == 2147483647


def test_unsent_counts_inactive_too_because_boinc_compares_with_lte(db):
    wu = WorkunitFactory()
    for state in [ServerState.INACTIVE, ServerState.UNSENT, ServerState.IN_PROGRESS]:
        ResultFactory(workunit=wu, server_state=state)
    assert Result.objects.unsent().count() == 2


def test_error_mask_names_list_the_bits_set():
    assert ErrorMask.names(2 | 16) == ["TOO_MANY_ERROR_RESULTS", "CANCELLED"]
    assert state_label("error_mask", 0) == "0"
    assert state_label("server_state", 4) == "IN_PROGRESS"
    assert state_label("outcome", 99) == "99"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "fields",
    [
        {"max_error_results": 5, "max_total_results": 4},  # error > total
        {"max_success_results": 5, "max_total_results": 4, "target_nresults": 1},  # success > total
        {"rsc_fpops_est": 0},
        {"min_quorum": 0},
    ],
)
def test_workunit_refuses_what_create_work_refuses(fields):
    app = AppFactory()
    defaults = {
        "target_nresults": 1,
        "max_error_results": 1,
        "max_total_results": 4,
        "max_success_results": 2,
        "min_quorum": 1,
    }
    defaults.update(fields)
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkunitFactory(app=app, **defaults)


@pytest.mark.django_db
def test_names_are_unique_as_the_scheduler_looks_results_up_by_name():
    wu = WorkunitFactory(name="wu")
    ResultFactory(workunit=wu, name="wu_0")
    with pytest.raises(IntegrityError), transaction.atomic():
        ResultFactory(workunit=wu, name="wu_0")
    with pytest.raises(IntegrityError), transaction.atomic():
        WorkunitFactory(app=wu.app, name="wu")


@pytest.mark.django_db
def test_host_fractions_must_lie_between_zero_and_one():
    owner = UserFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        HostFactory(owner=owner, on_frac=1.5)


@pytest.mark.django_db
def test_gpu_usage_needs_a_gpu_type():
    app = AppFactory()
    with pytest.raises(IntegrityError), transaction.atomic():
        AppVersionFactory(app=app, version_num=1, gpu_usage=1.0)
    version = AppVersionFactory(app=app, version_num=1, gpu_type="NVIDIA", gpu_usage=1.0)
    assert version.uses_gpu


@pytest.mark.django_db
def test_an_event_needs_a_workunit_a_result_or_a_host():
    with pytest.raises(IntegrityError), transaction.atomic():
        LifecycleEvent.objects.create(project=demo_project(), time=0, actor="x", field="server_state")
    host = HostFactory(owner__username="owner", domain_name="box")
    LifecycleEvent.objects.create(
        project=demo_project(), time=0, actor="owner", field="max_ncpus_pct", host=host, detail="100.0 → 50.0"
    )
    assert [str(e) for e in host.events.all()] == [f"host {host.pk}: max_ncpus_pct 100.0 → 50.0 by owner"]
