from django.urls import path

from protocol import views

app_name = "boinc"

urlpatterns = [
    path("", views.master, name="master"),
    path("cgi", views.scheduler, name="scheduler"),
    path("file_upload_handler", views.file_upload_handler, name="file_upload_handler"),
    path("download/<str:name>", views.download, name="download"),
    path("account/", views.account, name="account"),
    path("prefs/", views.prefs, name="prefs"),
]
