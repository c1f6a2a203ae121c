"""The volunteer world's tables.

The world lives in its own Django app rather than in ``backend/world.py`` (as DESIGN.md's
layout first sketched it) so that its tables and migrations never touch the back end's: the
back end's models are BOINC's schema, the world is a driver of that schema.
"""

from django.db import models

from backend.models import App, Project


class World(models.Model):
    """One simulated volunteer population with its clock (DESIGN.md "How data flows" 2)."""

    class Status(models.TextChoices):
        CREATED = "created", "Created"
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=100)
    seed = models.IntegerField(default=1)
    hosts = models.PositiveIntegerField(default=200)
    days = models.FloatField(default=3.0)
    locality = models.BooleanField(default=False)
    settings = models.JSONField(default=dict, blank=True, help_text="Overrides of world.simulation.WorldSettings.")
    app = models.ForeignKey(App, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # The project the world's app, volunteers and hosts belong to: its own (made when the
    # world starts), or for a world of volunteers for a live project's app, that project.
    project = models.ForeignKey(Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="worlds")
    start_time = models.BigIntegerField(default=0, help_text="Unix seconds at simulated t = 0.")
    clock = models.FloatField(default=0.0, help_text="Simulated seconds since the start.")
    speedup = models.FloatField(default=3600.0, help_text="Simulated seconds per wall second.")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CREATED)
    state = models.BinaryField(null=True, blank=True, help_text="The pickled simulation.")
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    job_id = models.CharField(max_length=64, blank=True, help_text="The RQ job of its next slice (world.jobs).")
    job_since = models.DateTimeField(null=True, blank=True, help_text="When job_id was named, before it was enqueued.")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.name

    @property
    def prefix(self) -> str:
        """What the world's names start with (its app, volunteers, hosts, files and work)."""
        return f"w{self.pk}"

    def mark_failed(self, reason: str, *, job_id: str | None = None) -> bool:
        """Running -> failed with ``reason``; with ``job_id``, only while the world still waits
        on that job (compare-and-set: a slice that chained the next job meanwhile wins)."""
        rows = World.objects.filter(pk=self.pk, status=World.Status.RUNNING)
        if job_id is not None:
            rows = rows.filter(job_id=job_id)
        return rows.update(status=World.Status.FAILED, error=reason) == 1


class WorldSample(models.Model):
    """One ``world.simulation.Sample``: the world at simulated time ``t``, taken at each of its
    rounds; the world's charts are drawn from these rows (``world.charts``)."""

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="samples")
    t = models.FloatField(help_text="Simulated seconds since the world's start.")
    unsent = models.PositiveIntegerField()
    in_progress = models.PositiveIntegerField()
    over = models.PositiveIntegerField()
    success = models.PositiveIntegerField()
    client_error = models.PositiveIntegerField()
    no_reply = models.PositiveIntegerField()
    other_outcome = models.PositiveIntegerField()
    valid = models.PositiveIntegerField()
    invalid = models.PositiveIntegerField()
    hosts_active = models.PositiveIntegerField()
    rpcs = models.PositiveBigIntegerField()
    rpcs_with_work = models.PositiveBigIntegerField()
    rpcs_without_work = models.PositiveBigIntegerField()
    rpcs_report_only = models.PositiveBigIntegerField()
    credit = models.FloatField()
    bytes_downloaded = models.PositiveBigIntegerField()

    class Meta:
        ordering = ["world", "t", "id"]
        indexes = [
            # the world's page: its samples in time order, the latest first for a live world
            models.Index(fields=["world", "t"], name="worldsample_world_t"),
        ]


class EngineHostRun(models.Model):
    """One engine host of a world (world.engine_host): its Host row and what its page needs to
    draw the engine's records (``world.engine_records``)."""

    world = models.ForeignKey(World, on_delete=models.CASCADE, related_name="engine_hosts")
    index = models.PositiveIntegerField(help_text="Its number in the world, after the simple hosts.")
    host = models.ForeignKey("backend.Host", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    name = models.CharField(max_length=100)
    policy = models.CharField(max_length=10)
    description = models.CharField(max_length=300, blank=True)
    project = models.CharField(max_length=100, help_text="The world's project as the engine names it.")
    resources = models.JSONField(default=dict, help_text="name -> {instances}, as the lab's records.")
    projects = models.JSONField(default=list, help_text="[{name, share}] of every project it is attached to.")
    duration = models.FloatField(help_text="Simulated seconds of its run (the world's end).")

    class Meta:
        ordering = ["world", "index"]
        constraints = [models.UniqueConstraint(fields=["world", "index"], name="enginehostrun_world_index")]

    def __str__(self) -> str:
        return self.name


class EngineRecordChunk(models.Model):
    """The records an engine host's run made since the chunk before (the engine's RecordChunk),
    stored as zlib(JSON); their series end to end give the run's."""

    run = models.ForeignKey(EngineHostRun, on_delete=models.CASCADE, related_name="chunks")
    seq = models.PositiveIntegerField()
    time = models.FloatField(help_text="Simulated seconds reached.")
    blob = models.BinaryField()

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="enginerecordchunk_run_seq")]
