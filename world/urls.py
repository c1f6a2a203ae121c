from django.urls import path

from world import engine_pages, views

app_name = "worlds"

urlpatterns = [
    path("", views.world_list, name="list"),
    path("new/", views.world_create, name="create"),
    path("compare/", views.world_compare, name="compare"),
    path("compare/new/", views.world_compare_start, name="compare_start"),
    path("attach/<int:scenario>/", views.world_attach, name="attach"),
    path("<int:pk>/", views.world_detail, name="detail"),
    path("<int:pk>/engine/<int:index>/", engine_pages.engine_host, name="engine_host"),
    path("<int:pk>/delete/", views.world_delete, name="delete"),
    path("<int:pk>/<slug:action>/", views.world_action, name="action"),
]
