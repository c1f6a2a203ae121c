from django.apps import AppConfig


class WorldConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "world"
    verbose_name = "Volunteer worlds"

    def ready(self) -> None:
        # the workunit page links results computed on engine hosts to their time slices
        from backend import views
        from world.engine_pages import slice_links

        if slice_links not in views.RESULT_LINKS:
            views.RESULT_LINKS.append(slice_links)
