"""The assistant's internal JSON API, /internal/v1/. Each app contributes its views here."""

from django.urls import path

from memories.views import health, recall

urlpatterns = [
    path("health", health.health, name="internal-health"),
    path("tools", recall.tools, name="internal-tools"),
    path("recall", recall.recall, name="internal-recall"),
    path("memories/remember", recall.remember, name="internal-remember"),
]
