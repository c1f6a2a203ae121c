"""Whether Redis and the RQ workers are alive, for the home page."""

from dataclasses import dataclass

import redis
from django.conf import settings
from rq import Worker


@dataclass(frozen=True)
class Health:
    redis_ok: bool
    redis_error: str
    workers: int
    redis_url: str
    embedded: bool

    @property
    def all_ok(self):
        return self.redis_ok and self.workers > 0


def check():
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)
    try:
        client.ping()
        workers = len(Worker.all(connection=client))
        return Health(True, "", workers, settings.REDIS_URL, settings.REDIS_EMBEDDED)
    except (redis.exceptions.RedisError, OSError) as exc:
        return Health(False, str(exc), 0, settings.REDIS_URL, settings.REDIS_EMBEDDED)
    finally:
        client.close()
