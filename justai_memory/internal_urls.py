"""The assistant's internal JSON API, /internal/v1/. Each app contributes its views here."""

from django.urls import path

from memories.views import forget, health

urlpatterns = [
    path("health", health.health, name="internal-health"),
    path("memories/find_to_forget", forget.find_to_forget, name="internal-find-to-forget"),
    path("memories/forget", forget.forget, name="internal-forget"),
]
