"""The NinjaAPI of /internal/v1/: bearer auth on every endpoint, the bounded JSON parser, the JSON error contract.

django-ninja because one pydantic declaration per request gives the validation (with error paths
such as ``turns[2].text``), the OpenAPI document and the assistant's tool schemas, so the three
cannot drift apart; it runs inside Django (same process, ORM, settings, tests).
"""

import functools

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest
from ninja import NinjaAPI

from justai_memory.api import conversations, health, household, ingest, learned, memories, procedures, tools
from justai_memory.api.auth import BearerToken, token_valid
from justai_memory.api.errors import UNAUTHORIZED, install_error_handlers
from justai_memory.api.parser import BoundedJsonParser
from justai_memory.edge.errors import error_response

# Who may read the API's description in a browser: staff who may view memories in the admin. The document
# describes how memories are read and written; whoever may see them in the admin (and its recall preview,
# which needs the same permission) learns nothing new from it, and staff without it see neither.
# A Django permission, not superuser only, so that it can be given to a group.
DOCS_PERMISSION = "memories.view_memory"
DOCS_FORBIDDEN = f"Reading the API's description needs the permission {DOCS_PERMISSION} (or a bearer token)."


def staff_or_token(view):
    """The OpenAPI document and its docs page: for a bearer-token client, or staff with DOCS_PERMISSION (a browser
    without a login goes to the admin login)."""
    staff_view = staff_member_required(view)

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if token_valid(request):
            return view(request, *args, **kwargs)
        if "Authorization" in request.headers:
            return error_response(UNAUTHORIZED, field="Authorization", status=401)
        user = request.user
        if user.is_active and user.is_staff and not user.has_perm(DOCS_PERMISSION):
            return error_response(DOCS_FORBIDDEN, status=403)
        return staff_view(request, *args, **kwargs)

    return wrapper


api = NinjaAPI(
    title="justai-memory internal API",
    version="1",
    description="What the household assistant calls: recall, remember, forget, conversations, sightings, events. "
    'Every error is JSON {"error": ..., "field": ...}.',
    auth=BearerToken(),
    parser=BoundedJsonParser(),
    urls_namespace="internal",
    openapi_url="/openapi.json",
    docs_url="/docs",
    docs_decorator=staff_or_token,
)
install_error_handlers(api)
for module in (health, tools, memories, learned, procedures, conversations, ingest, household):
    api.add_router("", module.router)
