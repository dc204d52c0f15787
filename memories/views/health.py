"""Liveness of the internal API."""

from django.db import connection
from django.http import JsonResponse

from justai_memory.internal_api import api_view
from memories.services.embeddings import active_embedder


@api_view(methods=("GET",))
def health(request, payload):
    """Liveness: the database answers and the embedder is loaded."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    embedder = active_embedder()
    return JsonResponse({"status": "ok", "embedder": embedder.name, "dim": embedder.dim})
