"""Engine hosts in a world (issue 20): volunteer hosts driven by the client engine against the
back end's real scheduler and daemons (world/engine_host.py)."""

import io
import pickle
import re

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from scheduling import engine
from tests.world.prefs import edit_prefs
from world.models import World
from world.report import summary
from world.simulation import DAY, Simulation, WorldSettings

pytestmark = pytest.mark.django_db(transaction=True)

# Engine hosts that are always on draw nothing from their engine's generator but what its
# server draws, so a run alone (the emulated server) and one in a world (the real scheduler)
# follow the same sample path whenever the scheduler sends what the emulated server would.
ALWAYS_ON = dict(on_frac_min=1.0, error_rate=0, no_reply_rate=0, leave_per_day=0, join_per_day=0)
# A server that always has work: a cushion of unsent results deeper than any one request of
# these hosts asks for (a request left short would part from the engine alone, which the tests
# check), and no limit on the jobs one RPC may bring (BOINC's max_wus_to_send of 10 per CPU cuts
# a first request of a host with a fast GPU short, which the emulated server never does). 100
# for ten hosts; the more there are, the more results the world must finish after its day.
ALWAYS_WORK = dict(cushion=100, max_wus_to_send=0)


def healthy(sim):
    figures = summary(sim)
    failed = [name for name, ok in figures["invariants"].items() if not ok]
    assert not failed, failed
    return figures


def world_rpcs(host, until):
    """(time, reason, jobs received by resource) of the host's RPCs to the world's project."""
    return [
        (e.time, e.reason, e.jobs_received) for e in host.em.rpc_events if e.project == host.project and e.time < until
    ]


def jobs_of(em, project, until):
    """(arrival, deadline, resource) of every job the run received from `project`."""
    return sorted(
        (j.received, j.deadline, j.rsc) for j in em.all_jobs if j.project.name == project and j.received < until
    )


def told_the_truth_until(host, until):
    """The arrival of the host's first job of the world's project whose speed, as the
    scheduler told it (the app version's flops), is not the host's own, or `until`.

    The emulated server tells every job's true speed; BOINC's scheduler estimates it, and once
    a host or an app version has reported enough results it learns from their elapsed times
    (reference/server.md §3.4, estimate_flops), so the estimates, and with them the client's
    buffer and requests, part from the emulated server's."""
    host_spec = host.scenario.host
    for j in sorted(host.em.all_jobs, key=lambda j: j.received):
        if j.project.name != host.project or j.received >= until:
            continue
        true = host_spec.cpu_flops if j.rsc == 0 else host_spec.gpus[j.rsc - 1].peak_flops
        if abs(j.flops - true) > 1e-9 * true:
            return j.received
    return until


def assert_agrees_with_engine_alone(sim, until, *, covered=0.8):
    """Each engine host asked, got and was due what the engine alone, on the same host with the
    emulated server, asks, gets and is due, before the scheduler told it a speed not its own
    (`told_the_truth_until`); that is at least `covered` of the RPCs of the period."""
    compared = total = 0
    for host in sim.engine_hosts:
        alone = engine.start(host.scenario, policy=host.policy, duration=host.em.duration, seed=host.em.seed)
        alone.advance_to(until)
        horizon = told_the_truth_until(host, until)
        expected = [(e.time, e.reason, e.jobs_received) for e in alone.rpc_events if e.time < horizon]
        assert world_rpcs(host, horizon) == expected, host.name
        assert jobs_of(host.em, host.project, horizon) == jobs_of(alone, host.project, horizon), host.name
        compared += len(expected)
        total += len(world_rpcs(host, until))
    assert compared >= covered * total > 0, (compared, total)


def test_engine_hosts_ask_get_and_report_as_the_engine_alone_where_the_server_always_has_work():
    settings = WorldSettings(
        hosts=4, days=1, seed=2, engine_hosts=({"count": 6, "policy": "boinc7"},), **ALWAYS_ON, **ALWAYS_WORK
    )
    sim = Simulation(settings, prefix="e")
    sim.setup()
    sim.run_until(DAY)
    assert sum(len(world_rpcs(h, DAY)) for h in sim.engine_hosts) > 20
    assert_agrees_with_engine_alone(sim, DAY)
    sim.run()
    figures = healthy(sim)
    reported = sum(e.reported for h in sim.engine_hosts for e in h.em.rpc_events if e.project == h.project)
    assert reported > 10
    assert figures["workunits"]["assimilated"] == figures["workunits"]["total"]


def test_a_world_with_engine_hosts_is_stored_between_slices_and_ends_as_one_run_in_one_go():
    # a cushion of 16 results: the slices and their pickles, not the work, are the subject
    values = dict(hosts=6, days=0.5, seed=5, cushion=16, engine_hosts=({"count": 4, "policy": "boinc5"},))
    whole = Simulation(WorldSettings(**values), prefix="a")
    whole.setup()
    whole.run()
    sliced = Simulation(WorldSettings(**values), prefix="b")
    sliced.setup()
    t = 0.0
    while not sliced.finished:
        t += 7000.0
        sliced.run_until(t)
        sliced = pickle.loads(pickle.dumps(sliced))
    healthy(whole)
    healthy(sliced)
    for a, b in zip(whole.engine_hosts, sliced.engine_hosts):
        assert [(e.time, e.jobs_received, e.reported) for e in a.em.rpc_events] == [
            (e.time, e.jobs_received, e.reported) for e in b.em.rpc_events
        ]
    assert whole.counters == sliced.counters


@pytest.mark.postgres
@pytest.mark.parametrize(
    "hosts, engine_hosts, workunits, cushion",
    [
        # 8 engine hosts beside 8 simple ones still fill the processors the engine drew, ask at
        # every buffer low and report every job through PostgreSQL's row locks while the simple
        # hosts claim rows beside them, so each of their RPCs of the day is checked against the
        # engine alone as at full size (more hosts add RPCs, not paths).
        pytest.param(8, 8, 50, 100, id="8-and-8"),
        pytest.param(200, 200, 500, 2000, marks=pytest.mark.long, id="200-and-200"),
    ],
)
def test_engine_and_simple_hosts_for_a_day_on_postgresql(postgres_only, hosts, engine_hosts, workunits, cushion):
    # runtime estimates from the benchmarks alone (<rte_no_stats>): the scheduler tells each
    # host its true speed all day, as the emulated server does, so the whole day agrees
    settings = WorldSettings(
        hosts=hosts,
        days=1,
        seed=1,
        engine_hosts=({"count": engine_hosts, "policy": "boinc7"},),
        runtime_stats=False,
        **ALWAYS_ON,
        **{**ALWAYS_WORK, "cushion": cushion},
    )
    sim = Simulation(settings, prefix="p")
    sim.setup()
    sim.run_until(DAY)
    assert_agrees_with_engine_alone(sim, DAY, covered=1.0)
    sim.run()
    figures = healthy(sim)
    assert figures["workunits"]["total"] > workunits


def engine_world(prefix, **values):
    """Three engine hosts on the lab's WRR example (projects A and B with shares 2 and 1, two
    1-GFLOPS CPUs), attached with a share of 100 to the world's project of 3-hour jobs due in
    two days; a cushion of unsent results the three can take in the drain."""
    settings = WorldSettings(
        hosts=0,
        days=2,
        seed=8,
        job_gflop=3 * 3600.0,
        delay_bound=2 * 86400,
        cushion=24,
        engine_hosts=({"count": 3, "policy": "boinc7", "preset": "seed-001-wrr-example"},),
        **ALWAYS_ON,
        **values,
    )
    sim = Simulation(settings, prefix=prefix)
    sim.setup()
    sim.run()
    healthy(sim)
    return sim


def first_day(sim):
    """Jobs received per project ("world" for the world's) in the first simulated day, and the
    FLOPs the hosts spent on their other projects over the run."""
    jobs = {}
    for host in sim.engine_hosts:
        for e in host.em.rpc_events:
            if e.time < DAY:
                name = "world" if e.project == host.project else e.project
                jobs[name] = jobs.get(name, 0) + sum(e.jobs_received.values())
    others = sum(p.flops_used for h in sim.engine_hosts for p in h.em.projects if p.name != h.project)
    return jobs, others


def fetch_backoffs(sim):
    """The client's work-fetch back-offs from the world's project (reference/client.md §6.5)."""
    return [
        d
        for h in sim.engine_hosts
        for d in h.em.decisions
        if d.kind == "backoff" and d.project == h.project and "sent no" in d.text and d.time < DAY
    ]


def test_a_daily_quota_hit_makes_engine_hosts_back_off_and_fetch_from_their_other_projects():
    free = engine_world("q0")
    quota = engine_world("q1", daily_result_quota=1)
    (free_jobs, free_others), (quota_jobs, quota_others) = first_day(free), first_day(quota)
    # fewer of the world's jobs on the first day, more of the other projects' and more of
    # their work done
    assert quota_jobs["world"] < free_jobs["world"]
    assert quota_jobs.get("A", 0) + quota_jobs.get("B", 0) > free_jobs.get("A", 0) + free_jobs.get("B", 0)
    assert quota_others > 1.1 * free_others
    # the scheduler said why (reference/server.md §3.11: a limit of 1 is not scaled by the
    # CPUs), and the clients backed off fetching from the world's project
    texts = [d.text for h in quota.engine_hosts for d in h.em.decisions if d.time < DAY]
    assert any("Daily job limit (1) has been reached" in t for t in texts)
    assert len(fetch_backoffs(quota)) > len(fetch_backoffs(free))


def test_the_world_command_runs_engine_hosts_and_refuses_a_bad_class():
    out = io.StringIO()
    # two-hour jobs on the preset's 1-GFLOPS host, which shares it with two projects of its own
    # and a cushion of 8 results, so the drain finishes little work (test_world.py: SMALL_CUSHION)
    args = ["--hosts", "2", "--days", "0.3", "--seed", "6", "--set", ENGINE_SET, "--set", "job_gflop=7200"]
    args += ["--set", "cushion=8"]
    call_command("world", *args, stdout=out)
    assert re.search(r"engine hosts: 2; to the world's project \d+ RPCs", out.getvalue())
    before = World.objects.count()
    with pytest.raises(CommandError, match="count must be a whole number") as refused:
        call_command("world", "--hosts", "2", "--set", 'engine_hosts=[{"count": 0}]', stdout=io.StringIO())
    assert refused.value.returncode == 2
    assert World.objects.count() == before


ENGINE_SET = 'engine_hosts=[{"count": 2, "policy": "boinc5", "preset": "seed-000-rpc-backoff"}]'


def test_an_engine_host_takes_up_a_buffer_edited_in_the_prefs_form(django_user_model):
    settings = WorldSettings(hosts=1, days=1, seed=4, engine_hosts=({"count": 2, "policy": "boinc7"},), **ALWAYS_ON)
    sim = Simulation(settings, prefix="f")
    sim.setup()
    sim.run_until(6 * 3600)
    host = sim.engine_hosts[0]
    asked_before = max(sum(s for s, _i in e.requests.values()) for e in host.em.rpc_events)
    edit_prefs(
        host.host_id,
        django_user_model.objects.create(username="owner"),
        work_buf_min_days=3,
        work_buf_additional_days=1,
    )
    edited_at = sim.t
    sim.run_until(edited_at + 3600)
    assert host.em.prefs.work_buf_min_days == 3
    after = [e for e in host.em.rpc_events if e.time > edited_at]
    # its buffer is far below three days now: it asks within a step or two, for more than before
    assert after and after[0].time <= edited_at + 2 * 60 + sim.settings.daemon_interval
    assert sum(s for s, _i in after[0].requests.values()) > asked_before
    other = sim.engine_hosts[1]
    assert other.em.prefs.work_buf_min_days == settings.work_buf_min_days
