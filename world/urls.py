from django.urls import path

from world import views

app_name = "worlds"

urlpatterns = [
    path("", views.world_list, name="list"),
    path("new/", views.world_create, name="create"),
    path("<int:pk>/<slug:action>/", views.world_action, name="action"),
]
