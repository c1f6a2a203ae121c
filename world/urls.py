from django.urls import path

from world import views

app_name = "worlds"

urlpatterns = [
    path("", views.world_list, name="list"),
    path("new/", views.world_create, name="create"),
    path("compare/", views.world_compare, name="compare"),
    path("compare/new/", views.world_compare_start, name="compare_start"),
    path("<int:pk>/", views.world_detail, name="detail"),
    path("<int:pk>/<slug:action>/", views.world_action, name="action"),
]
