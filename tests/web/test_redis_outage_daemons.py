"""rqcron and the RQ worker ride out a Redis that stops or freezes (issue 34's findings 2 and
3, boincweb.worker): each carries on within seconds of Redis answering again, the cron
scheduler enqueueing each due pass once, never a burst of the ones it missed.

The waits are as short as the behaviour allows: outages of a few seconds, a 1 s cron interval.
"""

import os
import signal
import subprocess
import time

import django_rq
import redis
from rq import Worker as RQWorker

from boincweb import embedded_redis
from tests.web.serving import BASE, MANAGE, child_env
from tests.web.test_redis_outage import own_redis, point_at, wait_for  # noqa: F401

OUTAGE_SECONDS = 2.5
CRON_CONFIG = """from rq import cron

cron.register(print, "default", interval=1)
"""
HISTORY = "rq:cron_job:builtins.print:jobs"


def start(tmp_path, name, command, url):
    log = open(tmp_path / f"{name}.log", "w+")
    env = child_env(REDIS_URL=url, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    process = subprocess.Popen([*MANAGE, *command], cwd=BASE, env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, log


def stop(process, log):
    process.terminate()
    process.wait(timeout=30)
    log.seek(0)
    output = log.read()
    log.close()
    return output


def enqueue_times(url):
    """The cron job's enqueue times, oldest first (its history in Redis)."""
    return [score for _, score in redis.Redis.from_url(url).zrange(HISTORY, 0, -1, withscores=True)]


def test_rqcron_carries_on_after_redis_stops_and_after_it_freezes(own_redis, tmp_path):  # noqa: F811
    url, server, restart = own_redis
    config = tmp_path / "cron_config.py"
    config.write_text(CRON_CONFIG)
    cron, log = start(tmp_path, "cron", ["rqcron", str(config)], url)
    try:
        wait_for(lambda: enqueue_times(url), 60, "first pass")

        embedded_redis.stop(server["process"])
        time.sleep(OUTAGE_SECONDS)
        restart()  # empty: the embedded Redis keeps nothing
        back = time.time()
        wait_for(lambda: len(enqueue_times(url)) >= 2, 10, "passes after the outage")
        assert cron.poll() is None
        times = enqueue_times(url)
        assert times[0] - back < 3, "the first pass after the outage came late"
        assert all(b - a >= 0.9 for a, b in zip(times, times[1:])), f"passes doubled: {times}"

        os.kill(server["process"].pid, signal.SIGSTOP)
        time.sleep(OUTAGE_SECONDS)
        os.kill(server["process"].pid, signal.SIGCONT)
        count = len(enqueue_times(url))
        wait_for(lambda: len(enqueue_times(url)) >= count + 2, 10, "passes after the freeze")
        times = enqueue_times(url)
        assert all(b - a >= 0.9 for a, b in zip(times, times[1:])), f"passes doubled: {times}"
        assert cron.poll() is None
    finally:
        output = stop(cron, log)
    assert "Traceback" not in output, output


def test_the_worker_carries_on_when_redis_stops_while_it_runs_a_job(settings, own_redis, tmp_path):  # noqa: F811
    url, server, restart = own_redis
    point_at(settings, url)
    worker, log = start(tmp_path, "worker", ["rqworker", "default"], url)
    try:
        wait_for(lambda: RQWorker.all(connection=redis.Redis.from_url(url)), 60, "worker")
        job = django_rq.get_queue("default").enqueue("time.sleep", 1.5)
        wait_for(lambda: job.get_status(refresh=True) == "started", 10, "job started")
        embedded_redis.stop(server["process"])
        time.sleep(OUTAGE_SECONDS)  # the job ends while Redis is away
        restart()
        # rq alone: "found an unhandled exception, quitting..." when it read the job's status
        job = django_rq.get_queue("default").enqueue("os.getpid")
        wait_for(lambda: job.get_status(refresh=True) == "finished", 15, "a job after the outage")
        assert worker.poll() is None
    finally:
        output = stop(worker, log)
    assert "quitting" not in output, output
