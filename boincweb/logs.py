"""Logging filters for the settings' LOGGING."""

import logging


class WithoutTraceback(logging.Filter):
    """Keep the record's message, drop its traceback: for errors that are the request's fault
    (a Host header outside ALLOWED_HOSTS), where a stack says nothing the message does not."""

    def filter(self, record):
        record.exc_info = None
        record.exc_text = None
        return True
