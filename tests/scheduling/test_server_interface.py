"""The engine's server interface (scheduling/engine/server.py) and a run driven from outside
(`engine.start`, `advance_to`): what a caller that puts a real scheduler behind a project,
as a volunteer world does, relies on."""

import pickle

import pytest

from scheduling import engine
from scheduling.engine.emulator import Emulator
from scheduling.engine.events import EV_FETCH, EV_SAMPLE
from scheduling.engine.server import STAND_IN, ServerReply
from tests.scheduling.helpers import Availability, Host, Prefs, cpu_app, project, scenario

DAY = 86400.0


def two_projects(on=1.0):
    host = Host(ncpus=2, cpu_flops=1e9, on=Availability(frac=on, mean_up=4 * 3600.0))
    return scenario(
        project("Alpha", apps=(cpu_app(hours=2.0, latency=2 * DAY),)),
        project("Beta", apps=(cpu_app(hours=3.0, latency=2 * DAY),)),
        host=host,
        prefs=Prefs(work_buf_min_days=0.2, work_buf_additional_days=0.3),
    )


class Recording:
    """The emulated server, recording each RPC and answering as told."""

    def __init__(self, reply=None):
        self.calls = []
        self.reply = reply

    def rpc(self, em, p, requests, reported):
        self.calls.append((em.now, dict(requests), [j.name for j in reported]))
        if self.reply is not None:
            return self.reply(em, p, requests, reported)
        return STAND_IN.rpc(em, p, requests, reported)


@pytest.mark.parametrize("compat", ["intended", "bce"])
def test_a_run_played_in_pieces_and_pickled_between_them_is_the_run_in_one_go(compat):
    sc = two_projects(on=0.7)
    whole = engine.run(sc, duration=3 * DAY, seed=4, compat=compat)
    em = engine.start(sc, duration=3 * DAY, seed=4, compat=compat)
    t = 0.0
    while em.next_time < float("inf"):
        t += 5000.0
        em.advance_to(t)
        em = pickle.loads(pickle.dumps(em))
    pieces = em.result()
    assert pieces.slices == whole.slices
    assert pieces.rpcs == whole.rpcs
    assert pieces.decisions == whole.decisions
    assert pieces.figures == whole.figures


def test_a_run_pickled_when_one_dict_held_its_waiting_events_goes_on_as_in_one_go(monkeypatch):
    # Emulators pickled before the waiting events were kept by kind held them in one dict
    # keyed by (time, kind); unpickling one (a world's engine host saved then) converts it
    sc = two_projects(on=0.7)
    whole = engine.run(sc, duration=3 * DAY, seed=4, compat="bce")
    em = engine.start(sc, duration=3 * DAY, seed=4, compat="bce")
    em.advance_to(DAY)
    assert any(em._waiting)
    current = Emulator.__getstate__

    def as_pickled_before(self):
        state = current(self)
        by_kind = state["_waiting"]
        state["_waiting"] = {(t, kind): e for kind, of_kind in enumerate(by_kind) for t, e in of_kind.items()}
        return state

    monkeypatch.setattr(Emulator, "__getstate__", as_pickled_before)
    data = pickle.dumps(em)
    monkeypatch.undo()
    old = pickle.loads(data)
    assert isinstance(old._waiting, list) and (old._waiting[EV_FETCH] or old._waiting[EV_SAMPLE])
    old.advance_to(3 * DAY)
    again = old.result()
    assert again.rpcs == whole.rpcs
    assert again.decisions == whole.decisions
    assert again.figures == whole.figures


def test_a_project_given_the_emulated_server_through_the_interface_runs_as_without_it():
    sc = two_projects()
    recording = Recording()
    em = engine.start(sc, duration=2 * DAY, seed=3, servers={"Beta": recording})
    em.advance_to(2 * DAY)
    alone = engine.run(sc, duration=2 * DAY, seed=3)
    assert em.result().rpcs == alone.rpcs
    beta = [e for e in alone.rpcs if e.project == "Beta"]
    assert [c[0] for c in recording.calls] == [e.time for e in beta]
    # the finished jobs each RPC reported are the ones the server was given
    assert [len(c[2]) for c in recording.calls] == [e.reported for e in beta]


def test_a_request_delay_holds_the_next_rpc_to_that_project_back():
    delay = 20000.0

    def delayed(em, p, requests, reported):
        reply = STAND_IN.rpc(em, p, requests, reported)
        return ServerReply(reply.jobs, request_delay=delay, messages=["come back later"])

    recording = Recording(delayed)
    em = engine.start(two_projects(), duration=3 * DAY, seed=1, servers={"Alpha": recording})
    em.advance_to(3 * DAY)
    times = [c[0] for c in recording.calls]
    assert len(times) >= 2
    assert all(b - a >= delay for a, b in zip(times, times[1:]))
    assert any("come back later" in d.text for d in em.decisions)


def test_a_refused_rpc_backs_the_project_off_and_the_client_fetches_from_the_other():
    recording = Recording(lambda em, p, requests, reported: None)
    em = engine.start(two_projects(), duration=2 * DAY, seed=2, servers={"Alpha": recording})
    em.advance_to(2 * DAY)
    result = em.result()
    alpha, beta = result.projects
    assert alpha.rpc_failures == len(recording.calls) >= 2
    assert alpha.jobs_received == 0 and beta.jobs_received > 0
    failed = [e for e in result.rpcs if e.project == "Alpha"]
    assert not any(e.ok for e in failed)
    # exponential back-off (reference/client.md §6.6): 2 min at most after the first failure,
    # growing after each, and the next RPC waits for it
    assert failed[0].backoff <= 120 < failed[-1].backoff
    assert all(b.time - a.time >= a.backoff for a, b in zip(failed, failed[1:]))


def test_an_aborted_job_leaves_the_queue_and_is_not_reported():
    aborted = []

    def aborting(em, p, requests, reported):
        reply = STAND_IN.rpc(em, p, requests, reported)
        if reply.jobs and not aborted:
            victim = reply.jobs[-1]
            aborted.append(victim.name)
            em.abort(victim, "test")
        return reply

    recording = Recording(aborting)
    em = engine.start(two_projects(), duration=2 * DAY, seed=1, servers={"Alpha": recording})
    em.advance_to(2 * DAY)
    assert aborted
    reported = {name for _t, _r, names in recording.calls for name in names}
    assert aborted[0] not in reported
    assert all(j.name != aborted[0] for p in em.projects for j in p.jobs)
    assert any("aborted" in d.text and aborted[0] in d.text for d in em.decisions)


def test_chunks_taken_and_forgotten_put_end_to_end_are_the_whole_runs_records():
    sc = two_projects(on=0.6)
    whole = engine.run(sc, duration=3 * DAY, seed=9)
    em = engine.start(sc, duration=3 * DAY, seed=9)
    series = {name: [] for name in ("slices", "rpcs", "decisions", "rec", "buffers")}
    t = 0.0
    while em.next_time < float("inf"):
        t += 7200.0
        em.advance_to(t)
        chunk = em.take_chunk(forget=True)
        for name in series:
            series[name].extend(getattr(chunk, name))
        em = pickle.loads(pickle.dumps(em))
    assert not em.decisions and len(pickle.dumps(em)) < 100_000
    rest = em.result()  # what came after the last chunk: the slices closed at the end
    slices = sorted(series["slices"] + list(rest.slices), key=lambda s: (s.start, s.resource, s.instance))
    assert tuple(slices) == whole.slices
    assert tuple(series["rpcs"]) == whole.rpcs
    assert tuple(series["decisions"]) == whole.decisions
    assert tuple(series["rec"]) == whole.rec and tuple(series["buffers"]) == whole.buffers
    assert rest.figures == whole.figures
