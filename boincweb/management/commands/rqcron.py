"""``manage.py rqcron CONFIG``: django-rq's command of that name, with boincweb.worker's
CronScheduler, which rides out Redis outages (boincweb is listed before django_rq in
INSTALLED_APPS, so this command is the one that runs)."""

import logging
import sys
from typing import Any

from django_rq.management.commands.rqcron import Command as DjangoRQCommand

from boincweb.worker import CronScheduler


class Command(DjangoRQCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        scheduler = CronScheduler(logging_level=getattr(logging, options["logging_level"]))
        self.stdout.write(f"Loading cron configuration from {options['config_path']}")
        scheduler.load_config_from_file(options["config_path"])
        self.stdout.write(self.style.SUCCESS(f"Starting cron scheduler with {len(scheduler.get_jobs())} jobs..."))
        try:
            scheduler.start()
        except KeyboardInterrupt:
            self.stdout.write("\nShutting down cron scheduler...")
            sys.exit(0)
