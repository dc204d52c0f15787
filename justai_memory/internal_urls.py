"""The assistant's internal JSON API, /internal/v1/. Each app contributes its views here."""

from django.urls import path

from memories.views import health

urlpatterns = [
    path("health", health.health, name="internal-health"),
]
