from django.apps import AppConfig


class BackendConfig(AppConfig):
    name = "backend"
    verbose_name = "Project back end"
