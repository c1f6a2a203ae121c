"""A world advanced by several RQ workers at once (world.shards): its hosts split into shards,
one slice between daemon rounds at a time, with a barrier between slices."""

import subprocess
import time
from collections import Counter

import django_rq
import pytest

from backend.models import LifecycleEvent, Result, ServerState
from tests.web.serving import BASE, MANAGE, child_env
from world import shards
from world.simulation import DAEMONS, END, Simulation, WorldSettings

# Several RQ workers advance one world, claiming its rows at once: database-specific.
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.database]


def set_up(**values):
    sim = Simulation(WorldSettings(**values), prefix="sh")
    sim.setup()
    return sim


def test_each_host_and_its_events_go_to_one_shard_and_the_rounds_to_the_coordinator():
    sim = set_up(hosts=10, days=0.5, seed=4, join_per_day=0.5)
    events = sorted(sim.heap)
    coordinator, parts = shards.split(sim, 3)
    for i, shard in enumerate(parts):
        own = [h.index for h in shard.hosts if h is not None]
        assert own == [index for index in range(len(sim.hosts)) if index % 3 == i]
        assert sorted(shard.host_index.values()) == own
        assert all(e[1] not in (DAEMONS, END) and e[4][0] in own for e in shard.heap)
    assert sorted(e[3] for e in coordinator.heap) == ["daemons", "end"]
    assert coordinator.hosts == [] and coordinator.host_index == {}
    assert sorted(coordinator.heap + [e for shard in parts for e in shard.heap]) == events
    # each shard draws from a generator of its own
    draws = {shard.rng.random() for shard in parts}
    assert len(draws) == 3
    assert coordinator.active_hosts() == sum(1 for h in sim.hosts if h.active)


def test_one_shard_runs_the_work_phase_round_by_round_as_the_single_chain(redis_client):
    chain = Simulation(WorldSettings(hosts=40, days=0.5, seed=3), prefix="ch")
    chain.setup()
    chain.run_until(chain.work_end)
    shards.start(set_up(hosts=40, days=0.5, seed=3), 1, run="one", stop_at=chain.work_end)
    django_rq.get_worker(shards.QUEUE).work(burst=True)
    assert shards.status(redis_client, "one") == "stopped", redis_client.get(shards.key("one", "error"))
    coordinator = shards.get(redis_client, "one", "coordinator")
    assert len(coordinator.samples) == 25
    assert coordinator.samples == chain.samples
    # and the hosts' events at the end of the work phase, as the chain's run_until does
    assert coordinator.totals() == chain.counters


def test_a_live_world_is_not_sharded():
    sim = set_up(hosts=2, days=0.1)
    sim.settings = WorldSettings(hosts=2, days=0.1, live_app="uppercase")
    with pytest.raises(ValueError, match="live world"):
        shards.split(sim, 2)


def workers(n, tmp_path, data_dirs):
    return [
        subprocess.Popen(
            [*MANAGE, "rqworker", shards.QUEUE],
            cwd=BASE,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / f"worker{i}.log", "w"),
            env=child_env(BOINCWEB_DATA_DIR=data_dirs, LOG_LEVEL="WARNING"),
        )
        for i in range(n)
    ]


def wait_for_end(redis_client, run, timeout):
    deadline = time.monotonic() + timeout
    while shards.status(redis_client, run) == "running":
        assert time.monotonic() < deadline, f"world {run} still running after {timeout} s"
        time.sleep(0.2)
    return shards.status(redis_client, run)


def run_to_end(sim, run, redis_client, tmp_path, data_dirs):
    """Run a world set up in two shards by two real RQ workers to its end; its summary, with
    every invariant asserted true."""
    shards.start(sim, 2, run=run)
    running = workers(2, tmp_path, data_dirs)
    try:
        ended = wait_for_end(redis_client, run, 600)
    finally:
        for worker in running:
            worker.terminate()
        for worker in running:
            worker.wait(timeout=60)
    assert ended == "finished", redis_client.get(shards.key(run, "error"))
    figures = shards.run_summary(redis_client, run)
    failed = [name for name, ok in figures["invariants"].items() if not ok]
    assert not failed, failed
    return figures


def test_two_workers_run_a_sharded_world_to_its_end_with_every_invariant(redis_client, data_dirs, tmp_path):
    # deadlines of half a day, hourly rounds and a cushion of 16 unsent results (not 160) keep
    # the drain short: its rounds are not skipped when sharded
    sim = set_up(
        cushion=16,
        hosts=16,
        days=0.5,
        seed=6,
        error_rate=0.05,
        no_reply_rate=0.02,
        leave_per_day=0.2,
        delay_bound=43200,
        daemon_interval=3600.0,
    )
    app_id = sim.app_id
    figures = run_to_end(sim, "two", redis_client, tmp_path, data_dirs)
    wus = figures["workunits"]
    assert wus["total"] > 0
    assert wus["assimilate_state"] == {"DONE": wus["total"]}
    assert wus["file_delete_state"] == {"DONE": wus["total"]}
    # no result sent twice, and the shards' counters add up to what the back end holds
    sent = Counter(
        LifecycleEvent.objects.filter(
            result__app_id=app_id, field="server_state", new=ServerState.IN_PROGRESS
        ).values_list("result_id", flat=True)
    )
    assert sent and max(sent.values()) == 1
    results = Result.objects.filter(app_id=app_id)
    assert figures["jobs_received"] == len(sent) == results.exclude(sent_time=0).count()
    assert figures["jobs_reported"] == results.exclude(received_time=0).count()
    assert figures["results"]["total"] == results.count()
    assert figures["hosts_left"] > 0 and figures["jobs_lost"] > 0
    # both workers took shards' slices, and the last round's sample counts every request
    coordinator = shards.get(redis_client, "two", "coordinator")
    assert coordinator.samples[-1].rpcs == figures["rpcs"] > 0
    queue = django_rq.get_queue(shards.QUEUE)
    ran = [queue.fetch_job(job_id) for job_id in queue.finished_job_registry.get_job_ids()]
    assert len({job.worker_name for job in ran if job.func_name.endswith("advance_shard")}) == 2


def test_a_sharded_run_stops_after_the_round_at_its_stop_time(redis_client, data_dirs, tmp_path):
    sim = set_up(hosts=6, days=0.25, seed=2)
    shards.start(sim, 2, run="part", stop_at=sim.work_end)
    running = workers(1, tmp_path, data_dirs)
    try:
        ended = wait_for_end(redis_client, "part", 300)
    finally:
        running[0].terminate()
        running[0].wait(timeout=60)
    assert ended == "stopped", redis_client.get(shards.key("part", "error"))
    coordinator = shards.get(redis_client, "part", "coordinator")
    # the round at the end of the work phase ran (it starts the drain) and none after it
    assert coordinator.draining and coordinator.t == sim.work_end
    assert coordinator.samples[-1].t == sim.work_end
    assert coordinator.totals().rpcs == sum(r.counters.rpcs for r in coordinator.reports) > 0


def test_engine_hosts_go_to_shards_with_their_events_and_come_back_for_the_summary(redis_client, data_dirs, tmp_path):
    sim = set_up(
        cushion=16,  # little left for the drain (tests/world/test_world.py: SMALL_CUSHION)
        hosts=4,
        days=0.5,
        seed=3,
        delay_bound=86400,
        daemon_interval=3600.0,
        engine_hosts=[{"count": 5, "policy": "boinc7"}],
    )
    coordinator, parts = shards.split(sim, 2)
    for i, shard in enumerate(parts):
        own = [k for k, h in enumerate(shard.engine_hosts) if h is not None]
        assert own == [k for k in range(5) if k % 2 == i]
        engine_events = [e[4][0] for e in shard.heap if e[3] == "engine"]
        assert engine_events and set(engine_events) <= set(own)
    assert coordinator.engine_hosts == []
    assert coordinator.active_hosts() == sum(1 for h in sim.hosts if h.active) + sum(
        1 for h in sim.engine_hosts if h.active
    )
    figures = run_to_end(sim, "engine", redis_client, tmp_path, data_dirs)
    assert figures["engine"]["hosts"] == 5
    assert figures["engine"]["world"]["jobs_received"] > 5
