"""The RQ worker class for boincweb (settings RQ["WORKER_CLASS"])."""

from django import db
from rq import Worker as RQWorker


class Worker(RQWorker):
    """An RQ worker that closes Django's database connections before forking a work horse,
    so parent and child never share one connection's socket."""

    def fork_work_horse(self, job, queue):
        db.connections.close_all()
        return super().fork_work_horse(job, queue)
