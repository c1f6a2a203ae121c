"""Charts, exports and presets of the scheduling lab, from hand-made records."""

import io
import json
import tempfile
import zipfile

import pytest

from scheduling import charts
from scheduling.engine.readers import read_client_state, read_json, read_pcdr, scenario_to_dict
from scheduling.exports import pcdr_losses, run_csv, write_client_state, write_pcdr
from scheduling.jobs import simulate
from scheduling.presets import BY_SLUG, PRESETS

H = 3600.0
FIGS = {"wasted_fraction": 0.0, "idle_fraction": 0.25, "share_violation": 0.5, "monotony": 0.1, "rpcs_per_job": 0.5}


def slice_(resource, instance, job, project, start, end, why="priority"):
    return dict(resource=resource, instance=instance, job=job, project=project, start=start, end=end, why=why)


def records(**over):
    base = dict(
        policy="boinc7",
        duration=10 * H,
        figures=dict(FIGS),
        resources={
            "cpu": {"instances": 2, "relative_speed": 1.0, "peak_flops": 2e9},
            "NVIDIA": {"instances": 1, "relative_speed": 10.0, "peak_flops": 1e10},
        },
        projects=[
            dict(name="A", flops_lost=3.6e12, deadlines_missed=1, jobs_completed=3),
            dict(name="B", flops_lost=0.0, deadlines_missed=0, jobs_completed=2),
        ],
        slices=[
            slice_("cpu", 0, "a1", "A", 0, 2 * H),
            slice_("cpu", 1, "b1", "B", 0, H, "edf"),
            slice_("NVIDIA", 0, "a2", "A", H, 3 * H),
        ],
        rec=[
            dict(time=t * H, project=p, rec=t * 0.1, priority=0.0, short_term_debt=-t, long_term_debt=t)
            for t in range(3)
            for p in ("A", "B")
        ],
        buffers=[
            dict(
                time=t * H,
                resource=r,
                saturated_time=5 * H - t * H,
                shortfall=0.0,
                nidle_now=0.0,
                busy_time=0.0,
                work_buf_min=2 * H,
                work_buf_total=6 * H,
            )
            for t in range(3)
            for r in ("cpu", "NVIDIA")
        ],
        rpcs=[
            dict(
                time=0.0,
                project="A",
                url="a",
                reason="need_work",
                ok=True,
                requests={"cpu": [10.0, 1.0]},
                jobs_received={"cpu": 2},
                reported=0,
                backoff=0.0,
                message="got 2 jobs",
            ),
            dict(
                time=H,
                project="B",
                url="b",
                reason="need_work",
                ok=False,
                requests={},
                jobs_received={},
                reported=0,
                backoff=60.0,
                message="scheduler down",
            ),
        ],
        decisions=[
            dict(time=0.0, kind="schedule", project="A", job="a1", text="Started a1"),
            dict(time=H, kind="preempt", project="B", job="b1", text="Preempted b1"),
        ],
        host_periods=[
            dict(start=4 * H, end=5 * H, state="off"),
            dict(start=6 * H, end=7 * H, state="gpu_suspended"),
            dict(start=8 * H, end=9 * H, state="not_active"),
            dict(start=8.5 * H, end=9.5 * H, state="disconnected"),
        ],
    )
    base.update(over)
    return base


def test_the_gantt_has_one_lane_per_cpu_and_gpu_instance():
    fig = charts.gantt(records())
    assert list(fig.layout.yaxis.ticktext) == ["CPU 0", "CPU 1", "NVIDIA 0"]
    bars = [t for t in fig.data if t.mode == "lines" and t.name in ("A", "B")]
    assert {t.name: sorted({y for y in t.y if y is not None}) for t in bars} == {"A": [0, 2], "B": [1]}


def test_gantt_bars_have_hover_with_job_project_and_why_and_edf_is_marked():
    fig = charts.gantt(records())
    hover = [text for t in fig.data if t.mode == "markers" for text in t.text]
    assert any("b1 · B" in h and "EDF" in h for h in hover)
    edf = next(t for t in fig.data if t.name.startswith("EDF"))
    assert list(edf.x) == [0.0, 1.0, None] and list(edf.y) == [1, 1, None]


def _extent(values):
    values = [v for v in values if v is not None]
    return min(values), max(values)


def test_the_gantt_shades_off_periods_over_every_lane_and_gpu_suspension_over_gpu_lanes():
    fig = charts.gantt(records())
    off = next(t for t in fig.data if t.name == "host off")
    suspended = next(t for t in fig.data if t.name == "computing suspended")
    gpu = next(t for t in fig.data if t.name == "GPU suspended")
    assert _extent(off.x) == (4.0, 5.0) and _extent(off.y) == (-0.5, 2.5)
    assert _extent(suspended.x) == (8.0, 9.0) and _extent(suspended.y) == (-0.5, 2.5)
    assert _extent(gpu.x) == (6.0, 7.0) and _extent(gpu.y) == (1.5, 2.5)
    assert not any("disconnected" in (t.name or "") for t in fig.data)


def test_the_gantt_has_no_gpu_shading_without_gpu_lanes():
    cpu_only = records(
        resources={"cpu": {"instances": 2, "relative_speed": 1.0, "peak_flops": 2e9}},
        slices=[slice_("cpu", 0, "a1", "A", 0, 2 * H)],
    )
    names = {t.name for t in charts.gantt(cpu_only).data}
    assert "GPU suspended" not in names and "host off" in names


def test_the_buffer_chart_shades_the_times_no_rpc_could_be_made():
    fig = charts.buffer_chart(records())
    band = next(t for t in fig.data if t.name.startswith("no network"))
    assert _extent(band.x) == (4.0, 9.5)
    assert sorted({x for x in band.x if x is not None}) == [4.0, 5.0, 8.5, 9.5]
    assert _extent(band.y) == (0.0, 6.0)


def test_every_chart_carries_the_cursor_line_first_and_a_time_axis_in_hours():
    for fig in (
        charts.gantt(records()),
        charts.rec_chart(records()),
        charts.priority_chart(records()),
        charts.buffer_chart(records()),
    ):
        assert fig.layout.shapes[0].name == "cursor"
        assert list(fig.layout.xaxis.range) == [0, 10.0]


def test_the_rec_chart_shows_rec_under_boinc7_and_long_term_debt_under_boinc5():
    rec = charts.rec_chart(records())
    assert [t.name for t in rec.data] == ["A", "B"] and list(rec.data[0].y) == [0.0, 0.1, 0.2]
    debt = charts.rec_chart(records(policy="boinc5"))
    assert [t.name for t in debt.data] == ["A long-term debt", "B long-term debt"]
    assert list(debt.data[1].y) == [0, 1, 2]


def test_equal_projects_lines_differ_in_dash_and_marker_and_rec_can_switch_to_a_log_axis():
    rec = charts.rec_chart(records())
    a, b = rec.data
    assert (a.line.dash, a.marker.symbol) != (b.line.dash, b.marker.symbol)
    buttons = rec.layout.updatemenus[0].buttons
    assert [b.args[0]["yaxis.type"] for b in buttons] == ["linear", "log"]


def test_the_priority_chart_shows_what_the_scheduler_compares():
    prio = charts.priority_chart(
        records(
            rec=[
                dict(time=0.0, project=p, rec=0, priority=v, short_term_debt=0, long_term_debt=0)
                for p, v in (("A", -0.5), ("B", -1.25))
            ]
        )
    )
    assert [(t.name, list(t.y)) for t in prio.data] == [("A", [-0.5]), ("B", [-1.25])]
    assert "Scheduling priority" in prio.layout.title.text
    std = charts.priority_chart(records(policy="boinc5"))
    assert [t.name for t in std.data] == ["A short-term debt", "B short-term debt"]
    assert list(std.data[0].y) == [0, -1, -2] and "Short-term debt" in std.layout.title.text


def test_the_buffer_chart_draws_saturated_time_against_min_and_max_with_rpc_markers():
    fig = charts.buffer_chart(records())
    names = [t.name for t in fig.data]
    assert names[:4] == ["CPU saturated time", "min buffer", "max buffer", "NVIDIA saturated time"]
    assert list(fig.data[0].y) == [5.0, 4.0, 3.0] and list(fig.data[1].y) == [2.0, 2.0, 2.0]
    a, b = (next(t for t in fig.data if t.name == f"RPC to {p}") for p in "AB")
    assert list(a.marker.symbol) == ["line-ns-open"] and list(b.marker.symbol) == ["x-thin-open"]
    # in a row of their own above the buffer, one line per project, hover text with the reply
    assert a.yaxis == b.yaxis == "y2" and list(a.y) == ["A"] and list(b.y) == ["B"]
    assert fig.layout.yaxis2.domain[0] > fig.layout.yaxis.domain[1]
    assert "scheduler down" in b.text[0] and b.text[0].startswith("day 1, 01:00")


def test_project_colours_are_the_same_whatever_the_order():
    assert charts.project_colours(["B", "A"]) == charts.project_colours(["A", "B", "A"])


def test_the_figure_card_has_five_figures_each_with_a_definition():
    card = charts.figure_card(FIGS)
    assert [c["key"] for c in card] == [
        "idle_fraction",
        "wasted_fraction",
        "share_violation",
        "monotony",
        "rpcs_per_job",
    ]
    assert all(c["definition"] and c["value"] == FIGS[c["key"]] for c in card)


def test_compared_figures_carry_differences_from_the_first_run_and_mark_the_best():
    other = records(figures={**FIGS, "idle_fraction": 0.05})
    rows = {r["key"]: r for r in charts.compare_figures([records(), other])}
    idle = rows["idle_fraction"]["cells"]
    assert idle[1]["diff"] == pytest.approx(-0.2) and idle[1]["best"] and not idle[0]["best"]
    assert not any(c["best"] for c in rows["monotony"]["cells"])


def test_figures_that_read_the_same_mark_no_best():
    near = records(figures={**FIGS, "idle_fraction": 0.25 + 4e-5, "monotony": 0.1 + 2e-3})
    rows = {r["key"]: r for r in charts.compare_figures([records(), near])}
    assert not any(c["best"] for c in rows["idle_fraction"]["cells"])
    assert [c["best"] for c in rows["monotony"]["cells"]] == [True, False]


def test_run_facts_count_preemptions_lost_cpu_hours_and_edf_slices():
    facts = charts.run_facts(records())
    assert facts["preemptions"] == 1 and facts["edf_slices"] == 1 and facts["deadlines_missed"] == 1
    assert facts["lost_hours"] == pytest.approx(3.6e12 / 1e9 / H)
    assert (facts["rpcs"], facts["rpc_failures"]) == (2, 1)


def test_the_explanation_names_only_what_differs():
    calm = records(
        decisions=[],
        figures={**FIGS, "idle_fraction": 0.05},
        projects=[
            dict(name="A", flops_lost=0.0, deadlines_missed=1, jobs_completed=3),
            dict(name="B", flops_lost=0.0, deadlines_missed=0, jobs_completed=2),
        ],
    )
    lines = charts.explain_differences([("boinc5", records()), ("boinc7", calm)])
    assert "boinc5 preempted a running job once; boinc7 preempted no running job." in lines
    assert any(line.startswith("boinc5 threw away 1 CPU-hours") for line in lines)
    assert "Idle: boinc7 0.05 against boinc5 0.25 (lower is better)." in lines
    assert not any("deadlines" in line for line in lines)


def test_the_explanation_says_no_time_slices_ran_in_edf_mode_rather_than_ran_zero():
    plain = records(slices=[slice_("cpu", 0, "a1", "A", 0, 2 * H)])
    lines = charts.explain_differences([("boinc5", records()), ("boinc7", plain)])
    edf = next(line for line in lines if "EDF" in line)
    assert edf == (
        "boinc5 ran one time slice in EDF mode, for a deadline in danger; under boinc7 no time slices ran in EDF mode."
    )
    assert not any(" 0 " in line for line in lines)


def test_a_gantt_of_ten_thousand_slices_stays_webgl_and_compact():
    many = [
        slice_("cpu", i % 4, f"j{i}", f"P{i % 5}", i * 60.0, i * 60.0 + 59.0, "edf" if i % 7 == 0 else "priority")
        for i in range(10_000)
    ]
    rec = records(slices=many, resources={"cpu": {"instances": 4, "relative_speed": 1.0, "peak_flops": 4e9}})
    fig = charts.gantt(rec)
    assert {t.type for t in fig.data if t.name and t.name.startswith("P")} == {"scattergl"}
    assert len([t for t in fig.data if t.type == "scattergl"]) == 11  # 5 projects x (bars, hover) + EDF
    assert len(fig.to_json()) < 3_000_000


def test_a_gantt_and_buffer_chart_of_a_day_are_svg_and_of_many_slices_webgl():
    """A few hundred slices draw faster as SVG than as WebGL without a GPU (charts.WEBGL_POINTS);
    the kind follows the figure's points, the bars and their hover points together."""
    few = records()
    assert {t.type for t in charts.gantt(few).data} == {"scatter"}
    assert {t.type for t in charts.buffer_chart(few).data} == {"scatter"}
    bars = charts.WEBGL_POINTS // 4 + 1  # 4 points a bar: its ends, the gap and its hover point
    many = [slice_("cpu", i % 2, f"j{i}", "A", i * 60.0, i * 60.0 + 59.0, "priority") for i in range(bars)]
    assert {t.type for t in charts.gantt(records(slices=many)).data if t.name == "A"} == {"scattergl"}
    assert {t.type for t in charts.gantt(records(slices=many[:-1])).data if t.name == "A"} == {"scatter"}


def test_the_csv_export_tags_every_row_with_its_table():
    rows = run_csv(records()).splitlines()
    assert rows[0] == "table,figure,value" and "figures,idle_fraction,0.25" in rows
    assert sum(r.startswith("slices,") for r in rows) == 3 and sum(r.startswith("rpcs,") for r in rows) == 2
    assert "host_periods,14400.0,18000.0,off" in rows and "table,start,end,state" in rows
    assert any("cpu=[10.0, 1.0]" in r for r in rows if r.startswith("rpcs,"))


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.slug)
def test_every_preset_exports_to_client_state_and_reads_back_the_same(preset):
    scenario = preset.scenario()
    with tempfile.TemporaryDirectory() as directory:
        zipfile.ZipFile(io.BytesIO(write_client_state(scenario))).extractall(directory)
        back = read_client_state(directory)

    def normal(s):
        return read_json(json.dumps({**scenario_to_dict(s), "name": "x", "description": ""}))

    assert normal(back) == normal(scenario)


def test_a_pcdr_preset_exports_to_the_same_notation():
    scenario = BY_SLUG["seed-001-scenario-1"].scenario()
    back = read_pcdr(write_pcdr(scenario))
    assert back.projects == scenario.projects and back.prefs == scenario.prefs and back.host == scenario.host
    assert pcdr_losses(scenario) == []


def test_what_pcdr_cannot_say_is_listed_in_comments():
    text = write_pcdr(BY_SLUG["seed-002-cpu-and-gpu"].scenario())
    assert "#   the host's GPUs" in text and "#   project Both: 2 apps (the notation has one)" in text
    assert "GpuOnly(" not in text and "CpuOnly(4, 72, 100)" in text


def test_there_is_a_preset_for_each_seed_with_client_examples():
    assert {p.seed for p in PRESETS} == {"000", "001", "002"}
    assert all(p.scenario().name.startswith(f"seed {p.seed}: ") for p in PRESETS)


@pytest.mark.parametrize("preset", PRESETS, ids=lambda p: p.slug)
def test_every_preset_runs_under_both_of_its_policies(preset):
    for policy in preset.policies:
        out = simulate(preset.scenario(), policy=policy, duration=6 * H, delta=60.0, seed=1, compat="intended")
        assert out["policy"] == policy and out["slices"]
        assert all(
            p["state"] in ("off", "not_active", "gpu_suspended", "disconnected") and p["end"] > p["start"]
            for p in out["host_periods"]
        )


def test_host_periods_cover_only_times_the_host_was_not_fully_up():
    out = simulate(
        BY_SLUG["seed-002-cpu-and-gpu"].scenario(),
        policy="boinc7",
        duration=2 * 86400.0,
        delta=60.0,
        seed=3,
        compat="intended",
    )
    gpu_off = [p for p in out["host_periods"] if p["state"] == "gpu_suspended"]
    assert gpu_off, "a GPU active fraction of 0.7 suspends the GPU within two days"
    for p in gpu_off:
        running = [
            s
            for s in out["slices"]
            if s["resource"] == "NVIDIA" and s["start"] < p["end"] - 1 and s["end"] > p["start"] + 1
        ]
        assert running == [], f"GPU slices during a suspension at {p}"


def test_the_explanation_says_which_project_got_more_or_less_than_its_share():
    def with_use(a, b):
        return records(
            projects=[
                dict(name="A", resource_share=50.0, flops_used=a, flops_lost=0.0, deadlines_missed=0, jobs_completed=1),
                dict(name="B", resource_share=50.0, flops_used=b, flops_lost=0.0, deadlines_missed=0, jobs_completed=1),
            ]
        )

    lines = charts.explain_differences([("boinc5", with_use(46.0, 54.0)), ("boinc7", with_use(32.0, 68.0))])
    assert "A (resource share 50%) got 46% of the computing under boinc5 and 32% under boinc7." in lines
    assert "B (resource share 50%) got 54% of the computing under boinc5 and 68% under boinc7." in lines
    close = charts.explain_differences([("boinc5", with_use(50.0, 50.0)), ("boinc7", with_use(52.0, 48.0))])
    assert not any("resource share" in line for line in close)
