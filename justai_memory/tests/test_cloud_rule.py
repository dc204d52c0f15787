"""The cloud rule on every endpoint that hands memory text to a model.

recall and find_to_forget are driven with a cloud conversation and with no conversation; the two
lists (a person's memories, procedures) have no conversation and are driven with a cloud model
location and with none. One rule decides (memories.selectors.privacy); an endpoint added later that
answers with memory text must join these, which the last test checks against the OpenAPI document.
"""

import pytest

from justai_memory.api.main import api as ninja_api
from memories.models import ForgetRequest, Kind
from memories.selectors.privacy import FORGET_NEEDS_LOCAL, WITHHELD_FOR_CLOUD
from memories.tests.factories import MemoryFactory
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

SECRET = "Der Code für das Gartentor ist 4711."
RECALL = "/internal/v1/recall"
FIND = "/internal/v1/memories/find_to_forget"
SOURCE = "/internal/v1/memories/source"
MEMORY_TEXT_ENDPOINTS = {
    RECALL: "Wie ist der Code für das Gartentor?",
    FIND: "Vergiss den Code für das Gartentor",
    SOURCE: "Der Code für das Gartentor",
}


PERSON_MEMORIES = "/internal/v1/people/{person_id}/memories"
PROCEDURES = "/internal/v1/memories"
DETAIL = "/internal/v1/memories/{memory_id}"
LISTS = [PERSON_MEMORIES, PROCEDURES]


@pytest.fixture
def home():
    room, anna = RoomFactory(), PersonFactory()
    MemoryFactory(content=SECRET, language="de", about=anna)
    MemoryFactory(content=SECRET, language="de", kind=Kind.PROCEDURE)
    return room, anna


def listed(api, path, room, anna, **params):
    if path == PERSON_MEMORIES:
        return api.get(path.format(person_id=anna.pk), params)
    return api.get(path, {"kind": "procedure", "room_id": room.pk, **params})


def ask(api, path, room, anna, **fields):
    return api.post(path, {"query": MEMORY_TEXT_ENDPOINTS[path], "room_id": room.pk, "speaker_id": anna.pk, **fields})


def allow_cloud():
    Household.objects.update_or_create(pk=1, defaults={"personal_memories_to_cloud": True})


def assert_withheld(path, response):
    assert response.status_code == 200, response.json()
    body = response.json()
    assert SECRET not in response.content.decode() and "4711" not in response.content.decode()
    assert body["withheld"] is True
    if path != FIND:
        assert body["memories"] == [] and body["withheld_reason"] == WITHHELD_FOR_CLOUD
    else:
        assert body["candidates"] == [] and body["token"] is None and body["withheld_reason"] == FORGET_NEEDS_LOCAL
        assert "local model" in body["withheld_reason"]
        assert not ForgetRequest.objects.exists()


def assert_answered(path, response):
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["withheld"] is False
    texts = [m["content"] for m in body["candidates" if path == FIND else "memories"]]
    assert SECRET in texts


@pytest.mark.parametrize("path", MEMORY_TEXT_ENDPOINTS)
def test_a_cloud_conversation_gets_no_memory_text_unless_the_household_allows_it(api, home, path):
    room, anna = home
    cloud = ConversationFactory(room=room, speaker=anna, model_location="cloud", language="de")
    assert_withheld(path, ask(api, path, room, anna, conversation_id=cloud.pk))
    # The caller cannot talk a cloud conversation local.
    assert_withheld(path, ask(api, path, room, anna, conversation_id=cloud.pk, model_location="local"))
    allow_cloud()
    assert_answered(path, ask(api, path, room, anna, conversation_id=cloud.pk))


@pytest.mark.parametrize("path", MEMORY_TEXT_ENDPOINTS)
def test_a_local_conversation_gets_memory_text(api, home, path):
    room, anna = home
    local = ConversationFactory(room=room, speaker=anna, model_location="local", language="de")
    assert_answered(path, ask(api, path, room, anna, conversation_id=local.pk))


@pytest.mark.parametrize("path", MEMORY_TEXT_ENDPOINTS)
def test_without_a_conversation_the_caller_must_say_where_the_model_runs(api, home, path):
    room, anna = home
    response = ask(api, path, room, anna)
    assert response.status_code == 400 and response.json()["field"] == "model_location"
    assert "model_location" in response.json()["error"]
    assert not ForgetRequest.objects.exists()
    assert_withheld(path, ask(api, path, room, anna, model_location="cloud"))
    assert_answered(path, ask(api, path, room, anna, model_location="local"))
    allow_cloud()
    assert_answered(path, ask(api, path, room, anna, model_location="cloud"))


@pytest.mark.parametrize("path", MEMORY_TEXT_ENDPOINTS)
@pytest.mark.parametrize("value", ["moon", "LOCAL", "Local", "Cloud", " local", "", 1, True, None])
def test_a_model_location_other_than_local_or_cloud_is_a_400_naming_it(api, home, path, value):
    room, anna = home
    response = ask(api, path, room, anna, model_location=value)
    assert response.status_code == 400 and response.json()["field"] == "model_location"
    assert not ForgetRequest.objects.exists()


@pytest.mark.parametrize("path", LISTS)
def test_a_list_of_memory_text_names_where_its_reader_runs_and_a_cloud_model_gets_none(api, home, path):
    room, anna = home
    missing = listed(api, path, room, anna)
    assert missing.status_code == 400 and missing.json()["field"] == "model_location"
    for value in ("moon", "LOCAL", ""):
        bad = listed(api, path, room, anna, model_location=value)
        assert bad.status_code == 400 and bad.json()["field"] == "model_location"
    cloud = listed(api, path, room, anna, model_location="cloud")
    assert cloud.status_code == 403 and cloud.json() == {"error": WITHHELD_FOR_CLOUD, "field": "model_location"}
    assert "4711" not in cloud.content.decode()
    local = listed(api, path, room, anna, model_location="local")
    assert local.status_code == 200 and SECRET in [m["content"] for m in local.json()["items"]]
    allow_cloud()
    allowed = listed(api, path, room, anna, model_location="cloud")
    assert allowed.status_code == 200 and SECRET in [m["content"] for m in allowed.json()["items"]]


def test_a_memorys_detail_names_where_its_reader_runs_and_a_cloud_model_gets_none(api, home):
    room, anna = home
    secret = MemoryFactory(content=SECRET, language="de")
    path = DETAIL.format(memory_id=secret.pk)
    ids = {"room_id": room.pk, "speaker_id": anna.pk}
    missing = api.get(path, ids)
    assert missing.status_code == 400 and missing.json()["field"] == "model_location"
    # Before the memory is looked up: a cloud model learns neither its text nor whether it exists.
    for memory_id in (secret.pk, 999999):
        cloud = api.get(DETAIL.format(memory_id=memory_id), {**ids, "model_location": "cloud"})
        assert cloud.status_code == 403 and cloud.json() == {"error": WITHHELD_FOR_CLOUD, "field": "model_location"}
    cloud_conversation = ConversationFactory(room=room, speaker=anna, model_location="cloud", language="de")
    talked_local = api.get(path, {**ids, "conversation_id": cloud_conversation.pk, "model_location": "local"})
    assert talked_local.status_code == 403 and "4711" not in talked_local.content.decode()
    assert api.get(path, {**ids, "model_location": "local"}).json()["content"] == SECRET
    allow_cloud()
    assert api.get(path, {**ids, "model_location": "cloud"}).json()["content"] == SECRET


def test_every_endpoint_that_answers_with_memory_text_is_driven_here():
    """An answer schema with memory content (memories or candidates with a content) must be in MEMORY_TEXT_ENDPOINTS."""
    schema = ninja_api.get_openapi_schema()
    components = schema["components"]["schemas"]

    def carries_content(ref_or_schema, seen=()) -> bool:
        if "$ref" in ref_or_schema:
            name = ref_or_schema["$ref"].rsplit("/", 1)[-1]
            if name in seen:
                return False
            return carries_content(components[name], (*seen, name))
        properties = ref_or_schema.get("properties", {})
        if "content" in properties:
            return True
        nested = [*properties.values(), ref_or_schema.get("items", {}), *ref_or_schema.get("anyOf", [])]
        return any(carries_content(p, seen) for p in nested if isinstance(p, dict) and p)

    found = set()
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for status, response in operation.get("responses", {}).items():
                answer = response.get("content", {}).get("application/json", {})
                if 200 <= int(status) < 300 and answer and carries_content(answer.get("schema", {})):
                    found.add(path)
    assert found == {*MEMORY_TEXT_ENDPOINTS, *LISTS, DETAIL}, found
