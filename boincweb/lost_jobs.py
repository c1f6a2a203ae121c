"""Whether an RQ job can still finish its work, or why not.

A job may fail outside its own error handling (a database error, the work horse killed by the
kernel or by the job timeout), be stopped or canceled, vanish from Redis (emptied, restarted,
or the job expired), or be abandoned by a worker that died: its entry in the started registry
then expires without the worker's heartbeat renewing it. The pages that show work done by jobs
(worlds; the lab's runs judge theirs the same way) call this to mark the work failed with the
reason instead of showing it "running" for ever.
"""

from rq.exceptions import InvalidJobOperation, NoSuchJobError
from rq.job import Job, JobStatus


def last_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else "no reason given"


def job_problem(queue, job_id, *, missing_is_lost=True, work="its work", again=""):
    """Why job ``job_id`` of ``queue`` can no longer finish ``work``, or None while it can.

    A job missing from Redis is lost only when ``missing_is_lost`` (the caller knows it was
    enqueued and has waited long enough). ``again`` ends the messages where starting the work
    once more is the remedy (the lab's runs)."""
    try:
        job = Job.fetch(job_id, connection=queue.connection, serializer=queue.serializer)
        status = job.get_status()
    except (NoSuchJobError, InvalidJobOperation):
        if not missing_is_lost:
            return None
        return f"Its job is no longer in the queue (Redis was emptied or restarted, or the job expired){again}."
    if status == JobStatus.FAILED:
        result = job.latest_result()
        return f"Its job failed: {last_line(result.exc_string if result else None)}"
    if status == JobStatus.STOPPED:
        return f"Its job was stopped before {work} ended."
    if status == JobStatus.CANCELED:
        return "Its job was canceled before it ran."
    if status == JobStatus.FINISHED:
        return f"Its job ended ({job.return_value()!r}) without finishing {work}."
    if status == JobStatus.STARTED and job.id in queue.started_job_registry.get_expired_job_ids():
        return f"The worker running its job stopped answering (it may have died){again}."
    return None
