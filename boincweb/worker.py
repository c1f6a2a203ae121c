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
"""

import time

import redis
from django import db
from rq import Worker as RQWorker
from rq import worker_registration
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
# Seconds between a down scheduler's or worker's tries to reach Redis again.
RECONNECT_SECONDS = 2.0
# How often the worker looks whether a scheduler process should be (re)started.
SCHEDULER_CHECK_SECONDS = 10.0


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

    def heartbeat(self, timeout=None, pipeline=None):
        super().heartbeat(timeout, pipeline)
        if pipeline is not None or self.is_horse:
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
