"""docs/api.md's endpoint table names the request and answer fields the OpenAPI document has.

Each row reads ``| `METHOD path` | body | answer |``; a body or answer written as ``{a, b?, c: [{d}]}``
(optionally after a status, ``201 {...}``) must list exactly the schema's properties, ``?`` exactly
on the request fields that are not required, and the same again for every nested object it spells
out. ``query a, b?`` lists the query parameters. Prose cells ("the person") are not checked.
"""

import re

import pytest
from django.conf import settings

pytestmark = pytest.mark.django_db

OPENAPI = "/internal/v1/openapi.json"
ROW = re.compile(r"^\| `(GET|POST|PUT|PATCH|DELETE) (/internal/v1/[^`]*)` \| (.*?) \| (.*) \|$", re.MULTILINE)
NAME = re.compile(r"\s*(\w+)(\?)?\s*")


class Fields(dict):
    """``{name: (optional, nested Fields or None, value as written)}`` from the docs' ``{a, b?: x|y, c: [{d}]}``."""


def parse_object(text: str, at: int) -> tuple[Fields, int]:
    """The object starting at ``text[at] == "{"``; returns it and the index after its ``}``."""
    assert text[at] == "{", text[at:]
    fields, at = Fields(), at + 1
    while True:
        match = NAME.match(text, at)
        if not match or not match.group(1):
            raise AssertionError(f"cannot read a field name at {text[at:]!r}")
        name, optional, at = match.group(1), bool(match.group(2)), match.end()
        nested, value = None, ""
        if text[at] == ":":
            start = at + 1
            nested, at = parse_value(text, start)
            value = text[start:at].strip()
        fields[name] = (optional, nested, value)
        while text[at] == " ":
            at += 1
        if text[at] == "}":
            return fields, at + 1
        assert text[at] == ",", f"expected ',' or '}}' at {text[at:]!r}"
        at += 1


def parse_value(text: str, at: int) -> tuple[Fields | None, int]:
    """A field's value: a nested object, an array of one, or anything else up to the next ``,`` or ``}``."""
    while text[at] == " ":
        at += 1
    if text.startswith("[{", at):
        nested, at = parse_object(text, at + 1)
        assert text[at] == "]", text[at:]
        return nested, at + 1
    if text[at] == "{":
        if re.match(r"\{\s*\.\.\.\s*\}", text[at:]):  # ``{...}``: any object
            return None, text.index("}", at) + 1
        return parse_object(text, at)
    depth = 0
    while depth or text[at] not in ",}":
        depth += {"[": 1, "(": 1, "]": -1, ")": -1}.get(text[at], 0)
        at += 1
    return None, at


def cell_object(cell: str) -> Fields | None:
    """The fields of a table cell whose code starts with an object (``{...}``, ``201 {...}``, ``[{...}]``)."""
    code = re.match(r"(?:\d{3} )?`(\[?\{.*?\}\]?)`", cell.strip())
    if not code:
        return None
    text = code.group(1)
    return parse_object(text[1:] if text.startswith("[") else text, 0)[0]


def resolve(schema: dict, components: dict) -> dict:
    """The object schema behind ``$ref``, ``anyOf`` with null and arrays of objects."""
    while True:
        if "$ref" in schema:
            schema = components[schema["$ref"].rsplit("/", 1)[1]]
        elif "anyOf" in schema:
            schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
        elif schema.get("type") == "array":
            schema = schema["items"]
        else:
            return schema


def compare(documented: Fields, schema: dict, components: dict, where: str, request: bool) -> list[str]:
    """What differs between the docs' fields and the schema's properties, nested objects included."""
    schema = resolve(schema, components)
    properties = schema.get("properties", {})
    problems = []
    if set(documented) != set(properties):
        problems.append(f"{where}: docs list {sorted(documented)}, the OpenAPI document has {sorted(properties)}")
    required = set(schema.get("required", []))
    for name, (optional, nested, value) in documented.items():
        if name not in properties:
            continue
        # ``confirm: true`` is what the caller must send, whatever the schema's default (false) says.
        if request and value != "true" and optional == (name in required):
            problems.append(f"{where}.{name}: '?' must mark exactly the fields that are not required")
        if nested is not None:
            problems += compare(nested, properties[name], components, f"{where}.{name}", request)
    return problems


def success_schema(operation: dict) -> dict | None:
    for status in ("200", "201"):
        response = operation["responses"].get(status)
        if response and "content" in response:
            return response["content"]["application/json"]["schema"]
    return None


def docs_rows() -> list[tuple[str, str, str, str]]:
    page = (settings.BASE_DIR / "docs" / "api.md").read_text()
    return ROW.findall(page)


def test_the_docs_rows_are_read():
    rows = docs_rows()
    assert len(rows) >= 25
    recall = next(r for r in rows if r[:2] == ("POST", "/internal/v1/recall"))
    fields = cell_object(recall[2])
    assert fields["query"] == (False, None, "") and fields["limit"] == (True, None, "")
    answer = cell_object(recall[3])
    assert set(answer["memories"][1]) >= {"id", "content", "found_by"}
    assert cell_object(" the person ") is None


def test_the_docs_name_the_request_and_answer_fields_of_the_openapi_document(api):
    document = api.get(OPENAPI).json()
    components = document["components"]["schemas"]
    problems, checked = [], 0
    for method, path, body, answer in docs_rows():
        operation = document["paths"][path][method.lower()]
        where = f"{method} {path}"
        query = re.match(r"query (.*)", body.strip())
        if query:
            names = {m.group(1) for m in re.finditer(r"`?(\w+)\??(?:=\w+)?`?", query.group(1))}
            parameters = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
            if set(names) != set(parameters):
                problems.append(
                    f"{where} query: docs list {sorted(names)}, the OpenAPI document has {sorted(parameters)}"
                )
            checked += 1
        requested = cell_object(body)
        if requested is not None:
            schema = operation["requestBody"]["content"]["application/json"]["schema"]
            problems += compare(requested, schema, components, f"{where} body", request=True)
            checked += 1
        answered = cell_object(answer)
        if answered is not None:
            problems += compare(answered, success_schema(operation), components, f"{where} answer", request=False)
            checked += 1
    assert checked >= 30
    assert not problems, "\n".join(problems)
