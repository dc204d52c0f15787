"""Liveness of the internal API."""

from django.db import connection
from ninja import Router, Schema

from justai_memory.api.common import ERRORS
from memories.services.embeddings import active_embedder

router = Router(tags=["health"])


class HealthOut(Schema):
    status: str
    embedder: str
    dim: int


@router.get("/health", response={200: HealthOut, **ERRORS}, url_name="internal-health")
def health(request):
    """Liveness: the database answers and the embedder is loaded."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    embedder = active_embedder()
    return {"status": "ok", "embedder": embedder.name, "dim": embedder.dim}
