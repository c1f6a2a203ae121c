from django.urls import path

from backend import views

app_name = "project"

urlpatterns = [
    path("status/", views.status, name="status"),
    path("status.json", views.status_json, name="status_json"),
    path("status.xml", views.status_xml, name="status_xml"),
    path("config/", views.config, name="config"),
    path("workunits/", views.workunit_list, name="workunit_list"),
    path("workunits.csv", views.workunit_csv, name="workunit_csv"),
    path("workunits/<int:pk>/", views.workunit_detail, name="workunit_detail"),
    path("workunits/actions/<slug:action>/", views.workunit_action, name="workunit_action"),
    path("results/", views.result_list, name="result_list"),
    path("results.csv", views.result_csv, name="result_csv"),
    path("results/<int:pk>/", views.result_detail, name="result_detail"),
    path("failures/", views.failures_by_version, name="failures_by_version"),
    path("failures/hosts/", views.failures_by_host, name="failures_by_host"),
    path("search/", views.search, name="search"),
    path("hosts/", views.host_list, name="host_list"),
    path("hosts/<int:pk>/", views.host_detail, name="host_detail"),
    path("hosts/<int:pk>/prefs/", views.host_prefs, name="host_prefs"),
    path("users/", views.user_list, name="user_list"),
    path("users/<int:pk>/", views.user_detail, name="user_detail"),
    path("teams/", views.team_list, name="team_list"),
    path("teams/<int:pk>/", views.team_detail, name="team_detail"),
]
