"""URLs of /internal/v1/: ninja's, with 405 and unknown paths also answered in the JSON contract."""

import functools

from django.http import Http404, HttpRequest, HttpResponseNotAllowed
from django.urls import URLPattern, re_path

from justai_memory.api.errors import METHOD_NOT_ALLOWED, NOT_FOUND, error_response
from justai_memory.api.main import api


def _json_contract(view):
    """ninja answers a wrong method with a plain-text 405 before any handler runs (and its root view raises
    Http404 outside them): give both the JSON body."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs):
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


def not_found(request: HttpRequest, *args, **kwargs):
    return error_response(NOT_FOUND, status=404)


patterns, _app, _namespace = api.urls
for pattern in patterns:
    if isinstance(pattern, URLPattern):
        pattern.callback = _json_contract(pattern.callback)

urlpatterns = [*patterns, re_path(r"", not_found, name="not-found")]
