"""Health of the service per component (justai_memory.health): 503 when the database, embedder or cluster is down."""

from django.http import JsonResponse

from justai_memory.health import health_report
from justai_memory.internal_api import api_view


@api_view(methods=("GET",))
def health(request, payload):
    body, status = health_report()
    return JsonResponse(body, status=status)
