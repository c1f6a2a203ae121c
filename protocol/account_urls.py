"""A volunteer's own pages, site-wide beside Django's login and logout (protocol.views)."""

from django.urls import path

from protocol import views

urlpatterns = [
    path("signup/", views.signup, name="signup"),
    path("me/", views.my_account, name="my_account"),
]
