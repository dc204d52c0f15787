"""The assistant's tool schemas match the request schemas of their endpoints (in the OpenAPI document)."""

import pytest

from justai_memory.api.tools import SESSION_FIELDS, TOOLS
from memories.limits import MAX_TEXT_CHARS

pytestmark = pytest.mark.django_db

CONSTRAINTS = ("type", "enum", "maxLength", "minLength", "pattern", "minimum", "maximum", "maxItems", "items")


def _request_schema(document: dict, path: str) -> dict:
    ref = document["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    return document["components"]["schemas"][ref.rsplit("/", 1)[1]]


def _without_null(schema: dict) -> dict:
    variants = [v for v in schema.get("anyOf", []) if v.get("type") != "null"]
    return {**variants[0], **{k: v for k, v in schema.items() if k != "anyOf"}} if variants else schema


def test_each_tools_parameters_are_its_endpoints_request_schema_without_the_session_fields(api):
    document = api.get("/internal/v1/openapi.json").json()
    body = api.get("/internal/v1/tools").json()
    assert [t["function"]["name"] for t in body["tools"]] == [tool.name for tool in TOOLS]
    for tool in body["tools"]:
        function = tool["function"]
        route = body["routes"][function["name"]]
        endpoint = _request_schema(document, route["path"])
        hidden = {t.hidden for t in TOOLS if t.name == function["name"]}.pop()
        parameters = function["parameters"]

        expected = set(endpoint["properties"]) - set(SESSION_FIELDS) - hidden
        assert set(parameters["properties"]) == expected, function["name"]
        assert set(parameters["required"]) == set(endpoint.get("required", [])) - set(SESSION_FIELDS)
        assert not hidden & set(endpoint.get("required", [])), "a hidden field must be optional"
        for name, prop in parameters["properties"].items():
            wanted = _without_null(endpoint["properties"][name])
            for key in CONSTRAINTS:
                assert prop.get(key) == wanted.get(key), (function["name"], name, key)
            assert prop.get("description"), (function["name"], name)
            assert "anyOf" not in prop and prop.get("type")


def test_yesterdays_drift_is_gone(api):
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in api.get("/internal/v1/tools").json()["tools"]}
    assert "episode" in tools["memory_remember"]["properties"]["kind"]["enum"]
    assert tools["memory_find_to_forget"]["properties"]["query"]["maxLength"] == MAX_TEXT_CHARS
    assert tools["memory_remember"]["properties"]["content"]["maxLength"] == MAX_TEXT_CHARS
    assert not set(SESSION_FIELDS) & {p for params in tools.values() for p in params["properties"]}
