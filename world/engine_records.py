"""The engine hosts' records, stored as a world goes and read back for their pages.

A world's state (the pickled Simulation) is dropped when the world ends, and is too big to load
for one host's page while it runs; so each engine host's records (its time slices, REC and
buffer samples, RPCs, decisions and host periods: scheduling/engine/records.py) are stored as
they come, one ``EngineRecordChunk`` per host every ``CHUNK_SECONDS`` of simulated time and
when the world stops, and ``records`` puts them end to end in the shape the lab's charts read
(``RunResult.to_dict()``, scheduling/charts.py).
"""

from __future__ import annotations

import json
import zlib
from typing import Any

from django.db.models import Max

from world.models import EngineHostRun, EngineRecordChunk, World
from world.simulation import Simulation

# Simulated seconds between two stores of the engine hosts' records while a world runs.
CHUNK_SECONDS = 3600.0
SERIES = ("slices", "rec", "buffers", "rpcs", "decisions", "host_periods")


def store(world_id: int, sim: Simulation, *, final: bool = False) -> int:
    """Store each engine host's records made since the last store, if ``CHUNK_SECONDS`` have
    passed since it or ``final`` (the world ended or paused); return the chunks stored."""
    if not sim.engine_hosts:
        return 0
    if not final and sim.t < sim.engine_records_at + CHUNK_SECONDS:
        return 0
    runs = {r.index: r for r in EngineHostRun.objects.filter(world_id=world_id)}
    missing = [h for h in sim.engine_hosts if h.index not in runs]
    if missing:
        EngineHostRun.objects.bulk_create(
            EngineHostRun(
                world_id=world_id,
                index=h.index,
                host_id=h.host_id,
                name=h.name,
                policy=h.policy,
                description=h.scenario.description[:300],
                project=h.project,
                resources=resources_of(h.em),
                projects=[{"name": p.name, "share": p.share} for p in h.em.projects],
                duration=h.em.duration,
            )
            for h in missing
        )
        runs = {r.index: r for r in EngineHostRun.objects.filter(world_id=world_id)}
    last = dict(
        EngineRecordChunk.objects.filter(run__world_id=world_id)
        .values("run_id")
        .annotate(seq=Max("seq"))
        .values_list("run_id", "seq")
    )
    chunks = []
    for h in sim.engine_hosts:
        run = runs[h.index]
        chunk = h.em.take_chunk(forget=True)
        data = chunk.to_dict()
        data["time"] = sim.t
        chunks.append(
            EngineRecordChunk(
                run=run,
                seq=last.get(run.pk, -1) + 1,
                time=sim.t,
                blob=zlib.compress(json.dumps(data, separators=(",", ":")).encode()),
            )
        )
    EngineRecordChunk.objects.bulk_create(chunks)
    sim.engine_records_at = sim.t
    return len(chunks)


def resources_of(em: Any) -> dict[str, dict[str, float]]:
    """The run's processor types as the lab's records name them ("cpu", then each GPU type)."""
    return {r.name: {"instances": r.ninstances} for r in em.resources}


def records(run: EngineHostRun) -> dict[str, Any]:
    """The engine host's records so far, as ``RunResult.to_dict()`` has them for the charts:
    every stored chunk's series end to end, with the slices and host periods open at the last
    store cut there (``partial`` while the world may go on)."""
    data: dict[str, Any] = {name: [] for name in SERIES}
    open_slices: list[dict[str, Any]] = []
    open_periods: list[dict[str, Any]] = []
    time = 0.0
    for blob in run.chunks.order_by("seq").values_list("blob", flat=True):
        chunk = json.loads(zlib.decompress(bytes(blob)))
        for name in SERIES:
            data[name].extend(chunk[name])
        open_slices, open_periods = chunk["open_slices"], chunk["open_host_periods"]
        time = chunk["time"]
    data["slices"] = sorted(data["slices"] + open_slices, key=lambda s: (s["start"], s["resource"], s["instance"]))
    data["host_periods"] = sorted(data["host_periods"] + open_periods, key=lambda h: (h["start"], h["state"]))
    world_over = World.objects.filter(pk=run.world_id, status=World.Status.FINISHED).exists()
    data.update(
        time=time,
        partial=not world_over,
        policy=run.policy,
        duration=time if world_over else run.duration,
        resources=run.resources,
        projects=run.projects,
    )
    return data
