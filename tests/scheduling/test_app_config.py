"""app_config.xml beside client_state.xml, read as BOINC's client reads it (client/app_config.cpp:
check_app_config, APP_CONFIGS::config_app_versions; lib/cc_config.cpp: APP_CONFIGS::parse)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import shutil

import pytest

from scheduling.engine import ScenarioError, load_scenario, run
from scheduling.engine.readers import project_dir

from .helpers import HOUR, cpu_app, job, project, scenario

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLIENT_STATE = ROOT / "scenarios" / "client_state"


@pytest.mark.parametrize(
    "url, folder",
    [
        # the folders of well-known projects, as every BOINC client names them
        ("http://einstein.phys.uwm.edu/", "projects/einstein.phys.uwm.edu"),
        ("https://www.gpugrid.net/", "projects/www.gpugrid.net"),
        ("http://boinc.bakerlab.org/rosetta/", "projects/boinc.bakerlab.org_rosetta"),
        ("https://milkyway.cs.rpi.edu/milkyway/", "projects/milkyway.cs.rpi.edu_milkyway"),
        ("http://a.org/x y?z=1", "projects/a.org_x_y_z_1"),
    ],
)
def test_the_project_folder_is_the_escaped_master_url(url, folder):
    assert project_dir(url) == folder.replace("/", os.sep)


def case_with(tmp_path, text: str | None, project_url="http://cpu.example.org/") -> str:
    """scenarios/client_state (cpu_project: cpu_app; gpu_project: a CPU and a CUDA version)
    with `text` as the app_config.xml of the project at `project_url`."""
    case = tmp_path / "case"
    shutil.copytree(CLIENT_STATE, case)
    if text is not None:
        folder = case / project_dir(project_url)
        folder.mkdir(parents=True)
        (folder / "app_config.xml").write_text(text)
    return str(case)


def apps_of(sc, name):
    return {a.name: a for p in sc.projects if p.name == name for a in p.apps}


def test_a_project_without_app_config_xml_is_read_as_before(tmp_path):
    sc = load_scenario(case_with(tmp_path, None))
    assert not any(p.app_config for p in sc.projects)


def test_app_max_concurrent_and_gpu_versions_set_the_apps_limit_and_gpu_usage(tmp_path):
    before = load_scenario(case_with(tmp_path / "a", None))
    gpu_app = next(
        a for p in before.projects if p.name == "gpu_project" for a in p.apps if any(v.gpu_type for v in a.versions)
    )
    text = (
        f"<app_config><app><name>{gpu_app.name}</name><max_concurrent>2</max_concurrent>"
        "<gpu_versions><gpu_usage>0.5</gpu_usage><cpu_usage>0.25</cpu_usage></gpu_versions></app>"
        "<app><name>no_such_app</name><max_concurrent>1</max_concurrent></app></app_config>"
    )
    sc = load_scenario(case_with(tmp_path / "b", text, "http://gpu.example.org/"))
    gp = next(p for p in sc.projects if p.name == "gpu_project")
    assert gp.app_config and not next(p for p in sc.projects if p.name == "cpu_project").app_config
    app = apps_of(sc, "gpu_project")[gpu_app.name]
    assert app.max_concurrent == 2
    for old, new in zip(gpu_app.versions, app.versions, strict=True):
        if old.gpu_type:
            assert (new.gpu_usage, new.avg_ncpus) == (0.5, 0.25)
        else:
            assert new == old  # gpu_versions leaves a CPU version alone (modify_usage_ac)


def test_gpu_versions_needs_both_usages_to_change_anything(tmp_path):
    before = load_scenario(case_with(tmp_path / "a", None))
    gpu_app = next(
        a for p in before.projects if p.name == "gpu_project" for a in p.apps if any(v.gpu_type for v in a.versions)
    )
    text = (
        f"<app_config><app><name>{gpu_app.name}</name>"
        "<gpu_versions><gpu_usage>0.5</gpu_usage></gpu_versions></app></app_config>"
    )
    sc = load_scenario(case_with(tmp_path / "b", text, "http://gpu.example.org/"))
    assert apps_of(sc, "gpu_project")[gpu_app.name].versions == gpu_app.versions


def test_app_version_sets_the_usage_of_its_plan_class_after_the_app_elements(tmp_path):
    before = load_scenario(case_with(tmp_path / "a", None))
    gpu_app = next(
        a for p in before.projects if p.name == "gpu_project" for a in p.apps if any(v.gpu_type for v in a.versions)
    )
    gpu_version = next(v for v in gpu_app.versions if v.gpu_type)
    text = (
        f"<app_config><app_version><app_name>{gpu_app.name}</app_name><plan_class>{gpu_version.plan_class}</plan_class>"
        "<avg_ncpus>2</avg_ncpus><ngpus>0.25</ngpus></app_version>"
        f"<app><name>{gpu_app.name}</name><gpu_versions><gpu_usage>0.5</gpu_usage><cpu_usage>0.1</cpu_usage>"
        "</gpu_versions></app></app_config>"
    )
    sc = load_scenario(case_with(tmp_path / "b", text, "http://gpu.example.org/"))
    app = apps_of(sc, "gpu_project")[gpu_app.name]
    new = next(v for v in app.versions if v.gpu_type)
    assert (new.avg_ncpus, new.gpu_usage) == (2.0, 0.25)
    assert app.max_concurrent == 0  # an <app> without <max_concurrent> sets none


@pytest.mark.parametrize(
    "body, message",
    [
        ("<project_max_concurrent>2</project_max_concurrent>", "<project_max_concurrent> is not modelled"),
        ("<report_results_immediately>1</report_results_immediately>", "<report_results_immediately> is not"),
        ("<app><name>cpu_app</name><max_concurrent>-1</max_concurrent></app>", "must be a whole number"),
        ("<app><name>cpu_app</name><max_concurrent>x</max_concurrent></app>", "max_concurrent"),
    ],
)
def test_what_the_engine_cannot_follow_is_refused_naming_the_file(tmp_path, body, message):
    with pytest.raises(ScenarioError, match=message) as info:
        load_scenario(case_with(tmp_path, f"<app_config>{body}</app_config>"))
    assert "app_config.xml (cpu_project)" in str(info.value)


def test_a_malformed_app_config_xml_is_refused(tmp_path):
    with pytest.raises(ScenarioError, match="app_config.xml: malformed XML"):
        load_scenario(case_with(tmp_path, "<app_config><app>"))
    with pytest.raises(ScenarioError, match="expected <app_config>"):
        load_scenario(case_with(tmp_path / "b", "<cc_config/>"))


def test_project_max_concurrent_of_0_and_unknown_elements_are_passed_over(tmp_path):
    text = "<app_config><project_max_concurrent>0</project_max_concurrent><shiny/></app_config>"
    sc = load_scenario(case_with(tmp_path, text))
    assert next(p for p in sc.projects if p.name == "cpu_project").app_config


def test_under_bce_an_app_config_limit_holds_and_one_from_the_state_file_alone_does_not():
    # check_app_config: a project with app_config.xml gets its apps' max_concurrent from it
    # (config_app_versions), one without has every limit cleared (clear_app_config)
    limited = project("M", [job("m1"), job("m2")], apps=(cpu_app(max_concurrent=1),))
    for with_file, starts in ((True, [0.0]), (False, [0.0, 0.0])):
        s = scenario(dataclasses.replace(limited, app_config=with_file), ncpus=2)
        bce = run(s, compat="bce", duration=HOUR / 2, existing_jobs_only=True)
        assert sorted(sl.start for sl in bce.slices) == starts
