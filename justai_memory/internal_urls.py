"""The assistant's internal JSON API, /internal/v1/. Each app contributes its views here."""

from django.urls import path

from memories.views import forget, health, recall
from transcripts import views as transcripts

urlpatterns = [
    path("health", health.health, name="internal-health"),
    path("tools", recall.tools, name="internal-tools"),
    path("recall", recall.recall, name="internal-recall"),
    path("memories/remember", recall.remember, name="internal-remember"),
    path("memories/find_to_forget", forget.find_to_forget, name="internal-find-to-forget"),
    path("memories/forget", forget.forget, name="internal-forget"),
    # transcripts: conversations, turns, working memory, sightings, events, observed memories
    path("conversations", transcripts.conversations_create, name="internal-conversations"),
    path("conversations/<int:conversation_id>/turns", transcripts.conversation_turns, name="internal-turns"),
    path(
        "conversations/<int:conversation_id>/end", transcripts.conversation_end_view, name="internal-conversation-end"
    ),
    path(
        "conversations/<int:conversation_id>/working_memory",
        transcripts.conversation_working_memory,
        name="internal-working-memory",
    ),
    path("sightings", transcripts.sightings_create, name="internal-sightings"),
    path("events", transcripts.events_create, name="internal-events"),
    path("memories/observe", transcripts.memories_observe, name="internal-memories-observe"),
]
