"""world.charts: figures from hand-made samples, and the transfer saved in words."""

import plotly.graph_objects as go

from world import charts
from world.simulation import Sample


def sample(t, **values):
    fields = {**dict.fromkeys(Sample._fields, 0), "credit": 0.0, "t": t, **values}
    return Sample(**fields)


SAMPLES = [
    sample(0, unsent=10, hosts_active=3),
    sample(
        1800,
        unsent=6,
        in_progress=4,
        hosts_active=3,
        rpcs=5,
        rpcs_with_work=4,
        rpcs_without_work=1,
        bytes_downloaded=2_000_000,
    ),
    sample(
        3600,
        unsent=2,
        in_progress=4,
        over=4,
        success=3,
        client_error=1,
        hosts_active=2,
        rpcs=9,
        rpcs_with_work=6,
        rpcs_without_work=1,
        rpcs_report_only=2,
        credit=12.5,
        bytes_downloaded=3_000_000,
    ),
    sample(
        3 * 3600,
        in_progress=2,
        over=8,
        success=6,
        client_error=1,
        no_reply=1,
        hosts_active=2,
        rpcs=12,
        rpcs_with_work=7,
        rpcs_without_work=2,
        rpcs_report_only=3,
        credit=30.0,
        bytes_downloaded=3_500_000,
    ),
]


def trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_the_results_chart_stacks_every_server_state_and_outcome_over_time():
    fig = charts.results_by_state(SAMPLES)
    assert isinstance(fig, go.Figure)
    assert [t.name for t in fig.data] == [
        "unsent",
        "in progress",
        "over: success",
        "over: client error",
        "over: no reply",
        "over: other outcome",
    ]
    assert all(t.stackgroup == "results" for t in fig.data)
    assert list(trace(fig, "unsent").y) == [10, 6, 2, 0]
    assert list(trace(fig, "over: success").y) == [0, 0, 3, 6]
    assert list(trace(fig, "over: no reply").y) == [0, 0, 0, 1]
    # three simulated hours: the axis is in hours
    assert list(fig.data[0].x) == [0, 0.5, 1, 3]
    assert fig.layout.xaxis.title.text == "simulated hours"


def test_the_rpc_chart_shows_each_intervals_rpcs_by_outcome_not_the_running_totals():
    fig = charts.rpcs(SAMPLES)
    assert list(trace(fig, "asked and got work").y) == [0, 4, 2, 1]
    assert list(trace(fig, "asked and got none").y) == [0, 1, 0, 1]
    assert list(trace(fig, "only reported").y) == [0, 0, 2, 1]
    assert fig.layout.barmode == "stack"


def test_hosts_credit_and_bytes_are_drawn_as_they_were_sampled():
    assert list(charts.hosts_active(SAMPLES).data[0].y) == [3, 3, 2, 2]
    assert list(charts.credit_granted(SAMPLES).data[0].y) == [0, 0, 12.5, 30.0]
    assert list(charts.bytes_downloaded(SAMPLES).data[0].y) == [0, 2.0, 3.0, 3.5]
    assert charts.bytes_downloaded(SAMPLES).layout.yaxis.title.text == "MB"


def test_a_young_world_is_drawn_in_minutes():
    young = [sample(0), sample(30), sample(90)]
    fig = charts.hosts_active(young)
    assert list(fig.data[0].x) == [0, 0.5, 1.5]
    assert fig.layout.xaxis.title.text == "simulated minutes"


def test_a_world_without_samples_still_gets_every_figure():
    figures = charts.world_figures([])
    assert list(figures) == ["results", "rpcs", "hosts", "credit", "bytes"]
    assert all(len(trace.x) == 0 for fig in figures.values() for trace in fig.data)


def test_compared_worlds_share_each_chart_one_line_each():
    other = [sample(0), sample(3600, bytes_downloaded=1_000_000, success=5, rpcs=4)]
    figures = charts.compare_figures([("plain", SAMPLES), ("locality", other)])
    assert list(figures) == ["bytes", "success", "credit", "rpcs"]
    bytes_fig = figures["bytes"]
    assert [t.name for t in bytes_fig.data] == ["plain", "locality"]
    assert list(bytes_fig.data[1].y) == [0, 1.0]
    assert list(bytes_fig.data[1].x) == [0, 1]  # hours, from the longer world
    assert bytes_fig.data[0].line.color != bytes_fig.data[1].line.color


def test_the_transfer_saved_is_stated_per_job_and_in_total():
    words = charts.transfer_saved(
        {"bytes_downloaded": 8_000_000_000, "jobs_received": 1000},
        {"bytes_downloaded": 1_000_000_000, "jobs_received": 1000},
    )
    assert words == (
        "Both worlds sent 1,000 jobs, and their input transfer is compared per job sent: locality "
        "scheduling downloaded 1 MB per job against plain scheduling's 8 MB, 88% less input transfer "
        "per job (in all 1 GB against 8 GB)."
    )


def test_the_difference_in_work_comes_before_the_transfer_per_job():
    words = charts.transfer_saved(
        {"bytes_downloaded": 1_900_000_000, "jobs_received": 570},
        {"bytes_downloaded": 1_700_000_000, "jobs_received": 816},
    )
    assert words.startswith("Locality scheduling sent 816 jobs and plain 570 (43% more), so their input")
    assert "locality scheduling downloaded 2.08 MB per job against plain scheduling's 3.33 MB, 38% less" in words
    assert words.endswith("(in all 1.7 GB against 1.9 GB).")


def test_more_transfer_with_locality_is_said_plainly():
    words = charts.transfer_saved(
        {"bytes_downloaded": 1_000_000, "jobs_received": 10}, {"bytes_downloaded": 2_000_000, "jobs_received": 10}
    )
    assert "downloaded 200 kB per job against plain scheduling's 100 kB, 100% more input transfer per job" in words


def test_no_comparison_before_both_worlds_sent_work():
    assert charts.transfer_saved({}, {"bytes_downloaded": 5, "jobs_received": 1}) == (
        "Neither world has sent enough work yet to compare their transfers."
    )
