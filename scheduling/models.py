"""Stored scenarios and runs of the client scheduling lab.

A scenario is kept in our JSON format (`readers.scenario_to_dict`), so the engine reads it back
with `read_json` exactly. A run's records (slices, REC, buffers, RPCs, decisions) are read
whole by the run page and the exports, never queried row by row, so they are one
zlib-compressed JSON blob; the summary (figures of merit and per-project totals) is a JSON
column the list and compare pages read without inflating the blob.
"""

from __future__ import annotations

import dataclasses
import json
import zlib

from django.conf import settings
from django.db import models

from scheduling.engine.policies import LABELS
from scheduling.engine.readers import read_json
from scheduling.engine.scenario import Scenario


class StoredScenario(models.Model):
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    data = models.JSONField(help_text="the scenario in our JSON format (readers.scenario_to_dict)")
    preset = models.CharField(max_length=60, blank=True, help_text="the preset it was loaded from")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated", "-id"]

    def __str__(self):
        return self.name

    def engine_scenario(self) -> Scenario:
        """The frozen engine dataclasses; raises ScenarioError if the stored data is not valid."""
        return read_json(json.dumps(self.data))

    def editable_by(self, user) -> bool:
        """Its owner and staff may edit or delete it (DESIGN.md: "editable by its owner and by
        staff only"); anyone logged in may duplicate or run it, which makes rows of their own."""
        if not user.is_authenticated:
            return False
        return user.is_staff or (self.owner_id is not None and self.owner_id == user.pk)


# Preferences a comparison may vary across runs of one scenario, with how a run's label names
# a value (reference/client.md §2 for what each one does).
VARIABLE_PREFS = {
    "cpu_scheduling_period_minutes": ("time slice", lambda v: f"{v:g} min"),
    "work_buf_min_days": ("min buffer", lambda v: f"{v:g} days"),
    "work_buf_additional_days": ("additional buffer", lambda v: f"{v:g} days"),
    "leave_apps_in_memory": ("leave apps in memory", lambda v: "yes" if v else "no"),
}


class Run(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    # the engine's policies (scheduling.engine.policies), each labelled "name: what it does"
    # the functional API with (value, label) pairs, which django-stubs does not type
    Policy = models.TextChoices(  # type: ignore[call-overload]
        "Policy", [(name.upper(), (name, f"{name}: {label}")) for name, label in LABELS.items()]
    )

    class Compat(models.TextChoices):
        INTENDED = "intended", "intended behaviour"
        BCE = "bce", "BOINC's emulator, bugs included"

    scenario = models.ForeignKey(StoredScenario, on_delete=models.CASCADE, related_name="runs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="lab_runs",
        help_text="who started it (the per-person cap counts these)",
    )
    policy = models.CharField(max_length=10, choices=Policy.choices)
    duration = models.FloatField(help_text="simulated seconds")
    delta = models.FloatField(default=60.0, help_text="decision step, seconds")
    seed = models.PositiveIntegerField(default=1)
    compat = models.CharField(max_length=10, choices=Compat.choices, default=Compat.INTENDED)
    prefs = models.JSONField(
        default=dict, blank=True, help_text="preferences that replace the scenario's for this run (VARIABLE_PREFS)"
    )
    job_id = models.CharField(max_length=64, blank=True, help_text="the RQ job that runs it")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0, help_text="fraction of simulated time done")
    error = models.TextField(blank=True)
    summary = models.JSONField(null=True, blank=True, help_text="RunResult.summary()")
    records_blob = models.BinaryField(null=True, blank=True, help_text="zlib(JSON of RunResult.to_dict())")
    created = models.DateTimeField(auto_now_add=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # views.start_runs counts a person's queued and running runs against LAB_ACTIVE_RUNS_PER_USER
            models.Index(fields=["owner", "status"], name="lab_run_owner_status"),
        ]

    def __str__(self):
        return f"run {self.pk}: {self.policy} on {self.scenario_id}"

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    @property
    def is_over(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    @property
    def duration_hours(self) -> float:
        return self.duration / 3600.0

    @property
    def variant(self) -> str:
        """The preferences this run changes, in words: "time slice 30 min"; "" for none."""
        return ", ".join(
            f"{VARIABLE_PREFS[k][0]} {VARIABLE_PREFS[k][1](v)}"
            for k, v in sorted(self.prefs.items())
            if k in VARIABLE_PREFS
        )

    @property
    def label(self) -> str:
        variant = f" ({self.variant})" if self.prefs else ""
        return f"#{self.pk} {self.policy}{variant} seed {self.seed} {self.compat}"

    def engine_scenario(self) -> Scenario:
        """The scenario this run simulates: the stored one with this run's preferences."""
        scenario = self.scenario.engine_scenario()
        if not self.prefs:
            return scenario
        return dataclasses.replace(scenario, prefs=dataclasses.replace(scenario.prefs, **self.prefs))

    @staticmethod
    def pack(records: dict) -> bytes:
        return zlib.compress(json.dumps(records, separators=(",", ":")).encode(), 6)

    def records(self) -> dict | None:
        """The whole RunResult.to_dict() of a finished run; while it runs, the partial records
        stored so far (`partial` True, see jobs.PartialRecords); None before any."""
        if self.records_blob is None:
            return None
        return json.loads(zlib.decompress(bytes(self.records_blob)))

    # transitions: compare-and-set on status, so a job that runs twice cannot clobber a result
    def mark_running(self, now) -> bool:
        return (
            Run.objects.filter(pk=self.pk, status=Run.Status.QUEUED).update(
                status=Run.Status.RUNNING, started=now, progress=0.0
            )
            == 1
        )

    def set_progress(self, fraction: float) -> bool:
        return Run.objects.filter(pk=self.pk, status=Run.Status.RUNNING).update(progress=fraction) == 1

    def set_partial(self, fraction: float, records: dict) -> bool:
        return (
            Run.objects.filter(pk=self.pk, status=Run.Status.RUNNING).update(
                progress=fraction, records_blob=Run.pack(records)
            )
            == 1
        )

    def mark_done(self, now, summary: dict, records: dict) -> bool:
        return (
            Run.objects.filter(pk=self.pk, status=Run.Status.RUNNING).update(
                status=Run.Status.DONE, finished=now, progress=1.0, summary=summary, records_blob=Run.pack(records)
            )
            == 1
        )

    def mark_failed(self, now, error: str) -> bool:
        return (
            Run.objects.filter(pk=self.pk, status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).update(
                status=Run.Status.FAILED, finished=now, error=error
            )
            == 1
        )
