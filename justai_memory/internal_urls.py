"""The assistant's internal JSON API, /internal/v1/. Each app contributes its views here."""

from django.urls import path

from memories import views as memory_views

urlpatterns = [
    path("health", memory_views.health, name="internal-health"),
]
