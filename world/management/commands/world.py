"""``manage.py world [--hosts N] [--days D] [--seed S] [--locality] [--json]`` (DESIGN.md
"Command-line contracts"): run a volunteer world in this process and print its figures.

``--set name=value`` overrides any other WorldSettings field (``world.simulation``), the value
read as JSON when it is JSON: ``--set 'engine_hosts=[{"count": 20, "preset":
"seed-002-cpu-and-gpu"}]'`` adds engine hosts (world.engine_host). Exit status 0 when every
invariant holds, 1 when one fails, 2 for bad arguments.
"""

import json
from argparse import ArgumentParser
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from boincweb.human import data_size, duration
from world.jobs import run_in_process, world_settings
from world.models import World
from world.simulation import DAY, WorldSettings


def setting_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class Command(BaseCommand):
    help = "Run a simulated volunteer world against the back end and print its figures."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--hosts", type=int, default=200)
        parser.add_argument(
            "--days",
            type=float,
            default=3.0,
            help="simulated days in which the project makes new work; the world then runs on until "
            "every job is finished (the report says how long it ran in all)",
        )
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument(
            "--locality", action="store_true", help="Send work by locality scheduling (reference/server.md §3.10)."
        )
        parser.add_argument("--json", action="store_true", help="Print one JSON object.")
        parser.add_argument(
            "--set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="Override a world setting, e.g. --set error_prone_fraction=0.2",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        overrides: dict[str, Any] = {}
        for item in options["set"]:
            name, sep, value = item.partition("=")
            if not sep or not name:
                raise CommandError(f"--set takes NAME=VALUE, not {item!r}", returncode=2)
            overrides[name.strip()] = setting_value(value.strip())
        world = World(
            seed=options["seed"],
            hosts=options["hosts"],
            days=options["days"],
            locality=options["locality"],
            settings=overrides,
        )
        try:
            settings = world_settings(world)
        except (ValueError, TypeError) as exc:
            raise CommandError(str(exc), returncode=2) from None
        world.save()
        # named once it has its id, before its project is made with that name
        world.name = command_world_name(world)
        World.objects.filter(pk=world.pk).update(name=world.name)
        figures = run_in_process(world)
        if options["json"]:
            self.stdout.write(json.dumps(figures, indent=2, sort_keys=True))
        else:
            self.stdout.write(text_report(figures))
        if not all(figures["invariants"].values()):
            failed = ", ".join(name for name, ok in figures["invariants"].items() if not ok)
            raise CommandError(undrained(figures, settings) or f"an invariant failed: {failed}", returncode=1)


def command_world_name(world: World) -> str:
    """The name of a world the command runs, which its project takes (/projects/ lists them):
    its id, so no two are alike, and what it was run with, so that two worlds of one seed can
    be told apart."""
    name = f"world {world.pk}: {world.hosts} hosts, {world.days:g} days, seed {world.seed}"
    if world.locality:
        name += ", locality"
    if world.settings:
        name += ", " + " ".join(sorted(world.settings))
    max_length = World._meta.get_field("name").max_length or len(name)
    return name if len(name) <= max_length else name[: max_length - 1] + "…"


def undrained(figures: dict[str, Any], settings: WorldSettings) -> str:
    """Why a run ended with work unfinished when its hosts simply ran out of drain time (the
    drain stops at ``drain_days`` whatever is left): a population too small for the work the
    generator made, not a rule broken. '' when that is not what happened."""
    wus = figures["workunits"]
    unfinished = wus["total"] - wus["assimilated"] - wus["errored"]
    if unfinished <= 0 or figures["simulated_seconds"] < (settings.days + settings.drain_days) * DAY:
        return ""
    return (
        f"the hosts did not finish the world's work in the drain's {settings.drain_days:g} simulated days: "
        f"{unfinished} of {wus['total']} workunits unfinished. Each workunit needs "
        f"{settings.min_quorum} results from different volunteers and the generator makes a file's "
        f"worth at a time; give the world more hosts, or more time with --set drain_days=N"
    )


def text_report(figures: dict[str, Any]) -> str:
    wus, results = figures["workunits"], figures["results"]
    lines = [
        f"world: {figures['hosts']} hosts, {figures['days']:g} days of new work, seed {figures['seed']}, "
        f"{'locality' if figures['locality'] else 'plain'} scheduling",
        f"simulated {duration(figures['simulated_seconds'])} in all, "
        f"{duration(max(0.0, figures['simulated_seconds'] - figures['days'] * DAY))} of them finishing the work "
        f"({figures['rpcs']} scheduler RPCs)",
        f"workunits: {wus['total']} ({wus['assimilated']} assimilated, {wus['errored']} with an error mask)",
        f"results: {results['total']}; outcomes {results['outcome']}",
        f"credit granted: {figures['credit_granted']:.1f}",
        f"input downloaded: {data_size(figures['bytes_downloaded'])} "
        f"({data_size(figures['bytes_downloaded_per_result'])} per job sent)",
        f"turnaround: mean {figures['turnaround']['mean']:.0f} s, p95 {figures['turnaround']['p95']:.0f} s",
    ]
    engine = figures.get("engine")
    if engine:
        mine, others = engine["world"], engine["others"]
        lines.append(
            f"engine hosts: {engine['hosts']}; to the world's project {mine['rpcs']} RPCs "
            f"({mine['rpc_failures']} failed), {mine['jobs_received']} jobs, deadlines met "
            f"{mine['deadlines_met']} / missed {mine['deadlines_missed']}, {mine['tflop_used']} TFLOP; "
            f"their other projects {others['jobs_received']} jobs, {others['tflop_used']} TFLOP"
        )
    lines += [f"invariant {name}: {'ok' if ok else 'FAILED'}" for name, ok in figures["invariants"].items()]
    return "\n".join(lines)
