"""Pages and forms while Redis is down: a message and a 503, never a 500 (one place for all).

``RedisOutageMiddleware`` answers any view that fails on a Redis connection error (a lab page
judging its runs' jobs, django-rq's queue pages, a world started as Redis went away) with the
site's 503 page naming the error, or for an htmx request the notice alone, which base.html shows
above the page while its panels keep their last content. A POST that enqueues a job (a view
under ``needs_redis``, or one of ``ENQUEUEING_ROUTES``) is checked before the view runs, so when
Redis is down it creates nothing and says why; a view that still loses Redis between the check
and its enqueue undoes what it wrote (``world.jobs.start``) before the error reaches here.
"""

import functools
import logging

import redis
from django.conf import settings
from django.shortcuts import render

logger = logging.getLogger(__name__)

REDIS_DOWN = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")
# POSTs of views outside boincweb's own apps that enqueue jobs, by URL name: the lab's, which
# start engine runs.
ENQUEUEING_ROUTES = {"lab:run_start", "lab:compare_start"}
RETRY_AFTER_SECONDS = 30


def needs_redis(view):
    """For a view whose POST enqueues a job: when Redis is down, the POST is refused with the
    message before the view runs, so it creates nothing. Put it under the login and permission
    checks, so that those answer first."""

    @functools.wraps(view)
    def checked(request, *args, **kwargs):
        refused = _refuse_if_down(request)
        return refused or view(request, *args, **kwargs)

    return checked


def _refuse_if_down(request):
    if request.method in SAFE_METHODS:
        return None
    error = redis_error()
    if not error:
        return None
    logger.warning("%s %s refused: Redis is not reachable: %s", request.method, request.path, error)
    return outage_response(request, error, refused_post=True)


def redis_error():
    """'' when Redis answers a PING within a second, else the error in words."""
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
        return ""
    except (redis.exceptions.RedisError, OSError) as exc:
        return str(exc) or type(exc).__name__
    finally:
        client.close()


def outage_response(request, error, *, refused_post=False):
    context = {"error": error, "refused_post": refused_post, "path": request.path, "method": request.method}
    template = "503.html#notice" if request.headers.get("HX-Request") else "503.html"
    response = render(request, template, context, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response


def _redis_cause(exception):
    """The Redis connection error that ``exception`` is or was raised from, if any."""
    seen = set()
    while exception is not None and id(exception) not in seen:
        if isinstance(exception, REDIS_DOWN):
            return exception
        seen.add(id(exception))
        exception = exception.__cause__ or exception.__context__
    return None


class RedisOutageMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        # The lab's enqueueing POSTs, once the visitor is logged in (else the view's own login
        # redirect answers).
        match = request.resolver_match
        if match is not None and match.view_name in ENQUEUEING_ROUTES and request.user.is_authenticated:
            return _refuse_if_down(request)
        return None

    def process_exception(self, request, exception):
        cause = _redis_cause(exception)
        if cause is None:
            return None
        logger.warning("%s %s: Redis is not reachable: %s", request.method, request.path, cause)
        return outage_response(request, str(cause) or type(cause).__name__)
