"""The work generator's rules: tools/backend_lib.cpp create_work2's parameter checks (each
limit positive; max_success_results and max_error_results within max_total_results,
target_nresults within max_success_results, min_quorum within target_nresults; equality
allowed) and sample_work_generator.cpp's top-up (enough workunits, each giving
target_nresults results, to bring the unsent results up to the target, nothing while a
workunit waits for its first results)."""

from types import SimpleNamespace

import pytest

from backend.daemons import work_generator
from backend.daemons.work_generator import CreateWorkError, work_parameters
from backend.models import Result, ServerState, Workunit
from tests.factories import NOW, demo_project

APP = SimpleNamespace(
    min_quorum=2,
    target_nresults=2,
    max_error_results=3,
    max_total_results=5,
    max_success_results=4,
    delay_bound=100,
    rsc_fpops_est=1e9,
    rsc_fpops_bound=1e10,
)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        dict(max_success_results=5),
        dict(max_error_results=5),
        dict(target_nresults=4),
        dict(min_quorum=2, target_nresults=2),
        dict(min_quorum=1),
        dict(rsc_disk_bound=1.0),
        dict(priority=3),
    ],
)
def test_limits_at_their_bounds_are_accepted(overrides):
    params = work_parameters(APP, overrides)
    assert {k: params[k] for k in overrides} == overrides
    assert params["delay_bound"] == 100


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(max_success_results=6), "max_success_results must not exceed max_total_results"),
        (dict(max_error_results=6), "max_error_results must not exceed max_total_results"),
        (dict(target_nresults=5), "target_nresults must not exceed max_success_results"),
        (dict(min_quorum=3), "min_quorum must not exceed target_nresults"),
        (dict(delay_bound=0), "delay_bound must be positive"),
        (dict(rsc_fpops_est=-1.0), "rsc_fpops_est must be positive"),
        (dict(min_quorum=0), "min_quorum must be positive"),
        (dict(rsc_disk_bound=0), "rsc_disk_bound must be positive"),
        (dict(colour="red"), "unknown workunit parameter"),
    ],
)
def test_inconsistent_limits_are_refused_by_name(overrides, message):
    with pytest.raises(CreateWorkError, match=message):
        work_parameters(APP, overrides)


@pytest.mark.parametrize(
    "unsent_target, unsent, batch, made",
    [
        (5, 0, 10, 3),  # 5 results wanted, 2 per workunit: 3 workunits
        (4, 0, 10, 2),
        (5, 4, 10, 1),
        (5, 5, 10, 0),  # at the target
        (5, 6, 10, 0),
        (9, 0, 2, 2),  # at most a batch
    ],
)
def test_the_generator_tops_unsent_results_up_to_the_target(project, unsent_target, unsent, batch, made):
    app = project.app
    app.unsent_target, app.target_nresults, app.min_quorum = unsent_target, 2, 1
    app.max_success_results = app.max_total_results = 4
    app.save()
    wu = project.workunit()
    project.result(wu, server_state=ServerState.OVER)  # has its results: no wait
    for _ in range(unsent):
        project.result(wu)
    before = Workunit.objects.count()
    assert work_generator.run_once(project=demo_project(), now=NOW, batch_size=batch) == made
    assert Workunit.objects.count() - before == made
    new = Workunit.objects.exclude(pk=wu.pk)
    assert all(w.target_nresults == 2 and w.transition_time == NOW for w in new)


def test_the_generator_waits_while_a_workunit_has_no_results_yet(project):
    project.app.unsent_target = 5
    project.app.save()
    project.workunit()
    assert work_generator.run_once(project=demo_project(), now=NOW, batch_size=10) == 0
    errored = Workunit.objects.get()
    errored.error_mask = 1
    errored.save()
    assert work_generator.run_once(project=demo_project(), now=NOW, batch_size=10) == 5  # an errored one is no wait


def test_a_deprecated_app_gets_no_work(project):
    project.app.unsent_target, project.app.deprecated = 5, True
    project.app.save()
    assert work_generator.run_once(project=demo_project(), now=NOW, batch_size=10) == 0
    assert not Result.objects.filter(server_state=ServerState.UNSENT).exists()


def test_names_continue_after_those_already_made_in_the_same_second(project):
    project.workunit(name=f"uppercase_{NOW}_0")
    project.workunit(name=f"uppercase_{NOW}_1")
    assert work_generator.next_names("uppercase", 2, NOW) == [f"uppercase_{NOW}_2", f"uppercase_{NOW}_3"]


def test_a_default_input_is_a_kilobyte_that_depends_only_on_the_name(project):
    from backend.daemons.hierarchy import download_path
    from backend.models import File

    [wu] = work_generator.create_work(project.app, ["job"], now=NOW)
    f = File.objects.get(name="job.in")
    assert f.nbytes == 1024 == len(download_path(demo_project(), "job.in").read_bytes())
    assert work_generator.input_data("job") == download_path(demo_project(), "job.in").read_bytes()
    assert work_generator.input_data("job") != work_generator.input_data("other")


def test_create_work_commits_nothing_when_an_input_file_cannot_be_written(project):
    from backend.daemons.hierarchy import download_path
    from backend.models import File, LifecycleEvent

    blocked = download_path(demo_project(), "job_b.in")
    blocked.mkdir(parents=True)  # a directory where the file would go
    with pytest.raises(IsADirectoryError):
        work_generator.create_work(project.app, ["job_a", "job_b", "job_c"], now=NOW)
    assert not Workunit.objects.filter(name__startswith="job_").exists()
    assert not File.objects.filter(name__startswith="job_").exists()
    assert not LifecycleEvent.objects.filter(actor=work_generator.ACTOR).exists()
