from django.urls import path

from scheduling import views

app_name = "lab"

urlpatterns = [
    path("", views.index, name="index"),
    path("new/", views.scenario_new, name="new"),
    path("import/", views.scenario_import, name="import"),
    path("presets/<slug:slug>/", views.load_preset, name="preset"),
    path("compare/", views.compare, name="compare"),
    path("<int:pk>/", views.scenario_detail, name="scenario"),
    path("<int:pk>/edit/", views.scenario_edit, name="edit"),
    path("<int:pk>/duplicate/", views.scenario_duplicate, name="duplicate"),
    path("<int:pk>/delete/", views.scenario_delete, name="delete"),
    path("<int:pk>/runs/", views.run_start, name="run_start"),
    path("<int:pk>/compare/", views.compare_start, name="compare_start"),
    path("<int:pk>/scenario.txt", views.export_scenario, {"fmt": "pcdr"}, name="export_pcdr"),
    path("<int:pk>/client_state.zip", views.export_scenario, {"fmt": "client_state"}, name="export_client_state"),
    path("<int:pk>/scenario.json", views.export_scenario, {"fmt": "json"}, name="export_json"),
    path("runs/<int:pk>/", views.run_detail, name="run"),
    path("runs/<int:pk>/charts.json", views.run_charts, name="run_charts"),
    path("runs/<int:pk>.json", views.export_run, {"fmt": "json"}, name="run_json"),
    path("runs/<int:pk>.csv", views.export_run, {"fmt": "csv"}, name="run_csv"),
]
