"""URLs of /internal/v1/: ninja's, with 405, 413 and unknown paths also answered in the JSON contract."""

import functools

from django.http import Http404, HttpRequest, HttpResponseNotAllowed
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt

from justai_memory.api.errors import METHOD_NOT_ALLOWED
from justai_memory.api.main import api
from justai_memory.edge.errors import NOT_FOUND, body_too_large, error_response
from memories.limits import MAX_BODY_BYTES


def _declared_too_big(request: HttpRequest) -> bool:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0) > MAX_BODY_BYTES
    except ValueError:
        return False  # no usable length: the parser counts what arrives


def _json_contract(view):
    """Answers that ninja gives outside the API's exception handlers, in the JSON contract: its plain-text 405
    and the Http404 of its root view. A declared Content-Length over the limit is refused before anything
    reads the body (or the token: the answer says nothing about the API)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
        if _declared_too_big(request):
            return error_response(body_too_large(), field="body", status=413)
        try:
            response = view(request, *args, **kwargs)
        except Http404:
            return error_response(NOT_FOUND, status=404)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = response["Allow"]
            response = error_response(METHOD_NOT_ALLOWED.format(method=request.method, allowed=allowed), status=405)
            response["Allow"] = allowed
        return response

    return wrapper


@csrf_exempt  # or CsrfViewMiddleware answers a POST to an unknown path with its HTML 403
def not_found(request: HttpRequest, *args, **kwargs):
    return error_response(NOT_FOUND, status=404)


patterns, _app, _namespace = api.urls
for pattern in patterns:
    if isinstance(pattern, URLPattern):
        pattern.callback = _json_contract(pattern.callback)

urlpatterns = [*patterns, re_path(r"", not_found, name="not-found")]
