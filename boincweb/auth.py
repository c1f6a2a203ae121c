"""Logging in: Django's model backend, refusing the demo login when DEBUG is off.

``manage.py seed_demo`` makes the staff login admin / boincweb while DEBUG is on, for ``make
run``. A database set up that way and then served with DEBUG off must not keep a superuser
whose password is printed in the README: the demo credentials are refused there, and a
session the account opened earlier no longer counts. An account named admin with any other
password is an ordinary account.
"""

import hashlib

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache

DEMO_LOGIN = ("admin", "boincweb")


def is_demo_account(user):
    """Whether ``user`` is the demo account: its name and still its demo password. The password
    check is slow by design, so its answer is cached under the stored hash, which any change
    of password replaces."""
    if user.username != DEMO_LOGIN[0] or not user.password:
        return False
    key = "auth:demo-account:" + hashlib.sha256(user.password.encode()).hexdigest()
    demo = cache.get(key)
    if demo is None:
        demo = user.check_password(DEMO_LOGIN[1])
        cache.set(key, demo, 3600)
    return demo


class RefuseDemoLoginBackend(ModelBackend):
    def user_can_authenticate(self, user):
        if not super().user_can_authenticate(user):
            return False
        return settings.DEBUG or not is_demo_account(user)
