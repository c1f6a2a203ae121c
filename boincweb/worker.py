"""The RQ worker class for boincweb (settings RQ["WORKER_CLASS"]), and its scheduler.

Both come back with Redis after an outage, within seconds:

- rq's scheduler process (``--with-scheduler``: it moves jobs enqueued for later, such as a
  world's next slice, to their queue) exits on the first Redis connection error, and the worker
  starts it again only in its maintenance pass, every ten minutes (rq's
  DEFAULT_MAINTENANCE_TASK_INTERVAL); so after an outage nothing enqueued for later ran for up
  to ten minutes. ``Scheduler`` waits for Redis instead and carries on, taking its locks again.
  The worker also restarts a scheduler process that died all the same, at its next heartbeat
  rather than at its next maintenance pass.
- The worker retries a lost connection with a back-off that rq lets grow to a minute; here it
  stops at ``max_connection_wait_time``.
- A Redis that restarted empty forgot the worker; its next heartbeat registers it again, so the
  home page counts it.
- rq's worker quits on a Redis error anywhere in its loop but the wait for a job: in the check
  for suspension, the maintenance pass, a heartbeat, or the look at a job's status after its
  work horse ended (found an unhandled exception, quitting). Here each of those waits for
  Redis and carries on. A job whose work horse ended while Redis was away keeps the outcome
  the horse could record; the daemon pass it ran committed once, and is not run again.
- ``CronScheduler`` is django-rq's cron scheduler (``manage.py rqcron``), which otherwise dies
  on the first Redis error: it waits for Redis and enqueues the next due pass, once, when Redis
  answers, never a burst of the passes it missed.
"""

import contextlib
import logging
import os
import time
from datetime import datetime

import redis
from django import db
from django_rq.cron import DjangoCronScheduler
from rq import Worker as RQWorker
from rq import worker_registration
from rq.cron import CronJob
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.exceptions import StopRequested
from rq.scheduler import RQScheduler
from rq.utils import now

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# Seconds between a down scheduler's or worker's tries to reach Redis again.
RECONNECT_SECONDS = 2.0
# How often the worker looks whether a scheduler process should be (re)started.
SCHEDULER_CHECK_SECONDS = 10.0


def wait_for_redis(connection: redis.Redis, log: logging.Logger, exc: Exception, who: str) -> None:
    """Sleep until ``connection`` answers a PING, saying so in ``log`` once."""
    log.warning("%s: Redis is not reachable (%s); waiting for it", who, exc)
    while True:
        time.sleep(RECONNECT_SECONDS)
        try:
            connection.ping()
        except REDIS_DOWN:
            continue
        log.warning("%s: Redis answers again", who)
        return


class Scheduler(RQScheduler):
    """rq's scheduler, surviving Redis outages: a pass that cannot reach Redis is tried again
    RECONNECT_SECONDS later, and the locks it held are taken again when Redis answers (its
    heartbeat re-acquires an expired lock; a restarted Redis lost them all)."""

    def work(self):
        self._install_signal_handlers()
        while not self._stop_requested:
            try:
                self.register_birth()
                break
            except REDIS_DOWN as exc:
                self._wait(exc)
        while True:
            if self._stop_requested:
                try:
                    self.stop()
                except REDIS_DOWN:
                    pass  # its locks and hash expire by themselves
                break
            try:
                if self.should_reacquire_locks:
                    self.acquire_locks()
                self.heartbeat()
                self.enqueue_scheduled_jobs()
            except REDIS_DOWN as exc:
                self._wait(exc)
                continue
            time.sleep(self.interval)

    def _wait(self, exc):
        self.log.warning("Scheduler: Redis is not reachable (%s); trying again in %.0f s", exc, RECONNECT_SECONDS)
        self._scheduled_job_registries = []
        time.sleep(RECONNECT_SECONDS)


class Worker(RQWorker):
    """An RQ worker that closes Django's database connections before forking a work horse,
    so parent and child never share one connection's socket, and that comes back with Redis
    (the module's docstring)."""

    max_connection_wait_time = RECONNECT_SECONDS
    _next_scheduler_check = 0.0

    def fork_work_horse(self, job, queue):
        db.connections.close_all()
        return super().fork_work_horse(job, queue)

    def _start_scheduler(
        self,
        burst=False,
        logging_level="INFO",
        date_format=DEFAULT_LOGGING_DATE_FORMAT,
        log_format=DEFAULT_LOGGING_FORMAT,
    ):
        """rq's, with ``Scheduler`` for RQScheduler."""
        self.scheduler = Scheduler(
            self.queues,
            connection=self.connection,
            logging_level=logging_level if logging_level is not None else self.log.level,
            date_format=date_format,
            log_format=log_format,
            serializer=self.serializer,
        )
        self.scheduler.acquire_locks()
        if not self.scheduler.acquired_locks:
            return  # another worker's scheduler has them; heartbeat() takes over if it dies
        if burst:
            try:
                self.scheduler.register_birth()
                self.scheduler.enqueue_scheduled_jobs()
            finally:
                self.scheduler.release_locks()
                self.scheduler.register_death()
        else:
            self.scheduler.start()

    def execute_job(self, job, queue):
        try:
            super().execute_job(job, queue)
        except REDIS_DOWN as exc:
            if self._horse_pid:  # not reaped yet: the job runs to its end before the next one
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self._horse_pid, 0)
                self._horse_pid = 0
            wait_for_redis(self.connection, self.log, exc, f"Worker {self.name} (job {job.id})")

    def set_current_job_working_time(self, current_job_working_time, pipeline=None):
        # called as the horse is watched; the time is kept in the worker either way
        try:
            super().set_current_job_working_time(current_job_working_time, pipeline)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: working time not recorded: %s", self.name, exc)

    def maintain_heartbeats(self, job):
        try:
            super().maintain_heartbeats(job)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: no heartbeat while job %s runs: %s", self.name, job.id, exc)

    def check_for_suspension(self, burst):
        while True:
            try:
                return super().check_for_suspension(burst)
            except REDIS_DOWN as exc:
                wait_for_redis(self.connection, self.log, exc, f"Worker {self.name}")

    def run_maintenance_tasks(self):
        try:
            super().run_maintenance_tasks()
        except REDIS_DOWN as exc:
            wait_for_redis(self.connection, self.log, exc, f"Worker {self.name}")

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        # rq waits out a ConnectionError here itself, but quits on a TimeoutError (a frozen Redis)
        while True:
            try:
                return super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            except REDIS_DOWN as exc:
                wait_for_redis(self.connection, self.log, exc, f"Worker {self.name}")

    def heartbeat(self, timeout=None, pipeline=None):
        if pipeline is not None:
            return super().heartbeat(timeout, pipeline)
        try:
            self._heartbeat(timeout)
        except REDIS_DOWN as exc:
            self.log.warning("Worker %s: no heartbeat: %s", self.name, exc)

    def _heartbeat(self, timeout):
        super().heartbeat(timeout)
        if self.is_horse:
            return
        if not self.connection.hexists(self.key, "birth"):
            # Redis restarted empty: the hash holds only the heartbeat just written
            with self.connection.pipeline() as p:
                p.hset(self.key, mapping=self.serialize())
                worker_registration.register(self, p)
                p.expire(self.key, (timeout or self.worker_ttl) + 60)
                p.execute()
        scheduler = self.scheduler
        if scheduler is None or time.monotonic() < self._next_scheduler_check:
            return
        self._next_scheduler_check = time.monotonic() + SCHEDULER_CHECK_SECONDS
        if scheduler._process is None or not scheduler._process.is_alive():
            scheduler.acquire_locks(auto_start=True)  # starts it once it holds a queue's lock


class CronScheduler(DjangoCronScheduler):
    """django-rq's cron scheduler (``manage.py rqcron``, boincweb/management/commands), riding out
    Redis outages (the module's docstring). A pass whose enqueue met the outage is looked up in
    the cron job's history when Redis answers: found, it counts as enqueued; not found, it is
    enqueued then. Either way each due pass is enqueued once."""

    def start(self):
        self.log.info("CronScheduler %s: starting...", self.name)
        self._install_signal_handlers()
        try:
            self._until_done(self.register_birth)
            while True:
                self._until_done(self._enqueue_due)
                self._until_done(self.heartbeat)
                sleep_time = self.calculate_sleep_interval()
                if sleep_time > 0:
                    time.sleep(sleep_time)
        except (KeyboardInterrupt, StopRequested):
            self.log.info("CronScheduler %s: stop requested", self.name)
        finally:
            try:
                self.register_death()
            except REDIS_DOWN:
                pass  # its entry expires by itself
            self.log.info("CronScheduler %s: shutdown complete", self.name)

    def _until_done(self, step):
        while True:
            try:
                return step()
            except REDIS_DOWN as exc:
                wait_for_redis(self.connection, self.log, exc, f"CronScheduler {self.name}")

    def _enqueue_due(self):
        """rq's enqueue_jobs, each job's enqueue time set once its enqueue is known to be done."""
        enqueued = []
        for job in self._cron_jobs:
            if not job.should_run():
                continue
            attempt, tried = now(), False
            while True:
                try:
                    if not (tried and self._in_history(job, attempt)):
                        job.enqueue(self.connection)
                    break
                except REDIS_DOWN as exc:
                    tried = True
                    wait_for_redis(self.connection, self.log, exc, f"CronScheduler {self.name}")
            # the next pass an interval after this one went in, not after the outage began
            job.set_enqueue_time(now() if tried else attempt)
            enqueued.append(job)
        if enqueued:
            self.save()
        return enqueued

    def _in_history(self, job: CronJob, since: datetime) -> bool:
        """Whether ``job`` was enqueued at or after ``since`` (its history, rq >= 2.11)."""
        latest = self.connection.zrange(job.job_history_key, -1, -1, withscores=True)
        return bool(latest) and float(latest[0][1]) >= since.timestamp()
