"""``manage.py wait_for_redis``: wait until Redis answers (the worker's first step in make run)."""

import time
from argparse import ArgumentParser
from typing import Any

import redis
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Wait until the configured Redis answers a PING."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--timeout", type=float, default=30.0)

    def handle(self, *args: Any, timeout: float, **options: Any) -> None:
        deadline = time.monotonic() + timeout
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1)
        while True:
            try:
                client.ping()
                return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                if time.monotonic() > deadline:
                    raise CommandError(
                        f"Redis at {settings.REDIS_URL} did not answer within {timeout:.0f}s", returncode=1
                    )
                time.sleep(0.2)
