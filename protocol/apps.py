from django.apps import AppConfig


class ProtocolConfig(AppConfig):
    """BOINC's wire protocol, so real BOINC clients can work for the project."""

    name = "protocol"
    default_auto_field = "django.db.models.BigAutoField"
