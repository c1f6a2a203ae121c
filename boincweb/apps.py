from django.contrib.staticfiles.apps import StaticFilesConfig


class StaticFiles(StaticFilesConfig):
    """Django's staticfiles, leaving out what the plotly package ships beside plotly.min.js
    (its sample data sets, theme templates and the notebook widget bundle: 9 MB no page uses)."""

    ignore_patterns = [*StaticFilesConfig.ignore_patterns, "datasets", "templates", "widgetbundle.js"]
