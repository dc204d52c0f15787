"""The request-body parser of the internal API: size and nesting bounded before json.loads sees the body."""

import json
import math
import re

from django.http import HttpRequest
from ninja.parser import Parser

from justai_core.errors import ApplicationError
from justai_memory.edge.errors import body_too_large
from memories.limits import MAX_BODY_BYTES, MAX_JSON_DEPTH

BODY_TOO_DEEP = f"The body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels."
BODY_NOT_JSON = "The body is not valid JSON."
BODY_NOT_OBJECT = "The body must be a JSON object."

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def json_depth(body: bytes) -> int:
    """How deeply the arrays and objects of a JSON text nest (brackets inside strings do not count)."""
    depth = deepest = 0
    for byte in _STRING.sub(b"", body).translate(None, _NOT_BRACKETS):
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e999
        raise ValueError("a number beyond float range")
    return value


class BoundedJsonParser(Parser):
    """JSON bodies of at most MAX_BODY_BYTES, nested at most MAX_JSON_DEPTH deep, that are objects.

    Python's json module recurses per level and raises RecursionError on deep input, so the depth is
    counted first. NaN, Infinity (accepted by Python, not JSON) and numbers beyond float range (1e999)
    are refused: PostgreSQL's jsonb cannot store them.
    """

    def parse_body(self, request: HttpRequest) -> dict:
        body = request.body
        if len(body) > MAX_BODY_BYTES:
            raise ApplicationError(body_too_large(), field="body", status=413)
        if json_depth(body) > MAX_JSON_DEPTH:
            raise ApplicationError(BODY_TOO_DEEP, field="body")
        try:
            data = json.loads(body, parse_constant=_no_constant, parse_float=_finite)
        except (ValueError, UnicodeDecodeError):
            raise ApplicationError(BODY_NOT_JSON, field="body") from None
        if not isinstance(data, dict):
            raise ApplicationError(BODY_NOT_OBJECT, field="body")
        return data
