"""The forget endpoints: memory.find_to_forget and memory.forget, with their 4xx answers."""

from datetime import timedelta

import pytest
from django.utils import timezone

from memories.models import ForgetRequest, Memory, Scope, Tombstone
from memories.tests.factories import MemoryFactory
from people.tests.factories import PersonFactory, RoomFactory

pytestmark = pytest.mark.django_db

FIND = "/internal/v1/memories/find_to_forget"
FORGET = "/internal/v1/memories/forget"


@pytest.fixture
def home():
    anna, ben, kitchen = PersonFactory(), PersonFactory(), RoomFactory()
    key = MemoryFactory(content="Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.", language="de")
    gate = MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    return anna, ben, kitchen, key, gate


def find(api, query, room, speaker=None):
    payload = {"query": query, "room_id": room.pk, "model_location": "local"}
    if speaker is not None:
        payload["speaker_id"] = speaker.pk
    return api.post(FIND, payload)


def test_find_then_forget(meaning, api, home):
    anna, _, kitchen, key, gate = home
    response = find(api, "Bitte vergiss, wo der Ersatzschlüssel ist", kitchen, anna)
    assert response.status_code == 200
    body = response.json()
    assert body["candidates"][0] == {"id": key.pk, "content": key.content, "label": "confirmed", "scope": "shared"}
    assert body["token"] and body["expires_at"]

    response = api.post(
        FORGET, {"token": body["token"], "confirm": True, "speaker_id": anna.pk, "memory_ids": [key.pk]}
    )
    assert response.status_code == 200
    assert response.json() == {"forgotten": 1, "memory_ids": [key.pk]}
    assert list(Memory.objects.values_list("pk", flat=True)) == [gate.pk]
    assert Tombstone.objects.get().memory_id == key.pk


def test_nothing_to_forget_gives_no_token(meaning, api, home):
    _, _, kitchen, _, _ = home
    response = find(api, "Vergiss meine Steuererklärung", kitchen)
    assert response.status_code == 200
    assert response.json() == {
        "token": None,
        "expires_at": None,
        "candidates": [],
        "withheld": False,
        "withheld_reason": None,
    }


def test_a_private_memory_is_offered_only_to_its_owner(meaning, api, home):
    anna, ben, kitchen, _, _ = home
    secret = MemoryFactory(content="Meine Geheimnummer ist 2468.", language="de", scope=Scope.PRIVATE, owner=anna)
    for speaker in (ben, None):
        ids = [c["id"] for c in find(api, "Vergiss meine Geheimnummer 2468", kitchen, speaker).json()["candidates"]]
        assert secret.pk not in ids
    ids = [c["id"] for c in find(api, "Vergiss meine Geheimnummer 2468", kitchen, anna).json()["candidates"]]
    assert ids[0] == secret.pk


@pytest.mark.meaning_blind("refused before anything is embedded")
@pytest.mark.parametrize(
    ("payload", "field", "status"),
    [
        ({"room_id": "ROOM"}, "query", 400),
        ({"query": "", "room_id": "ROOM"}, "query", 400),
        ({"query": "x" * 4001, "room_id": "ROOM"}, "query", 400),
        ({"query": "Vergiss den Code"}, "room_id", 400),
        ({"query": "Vergiss den Code", "room_id": 999999}, "room_id", 404),
        ({"query": "Vergiss den Code", "room_id": "ROOM", "speaker_id": 999999}, "speaker_id", 404),
        ({"query": "Vergiss den Code", "room_id": "ROOM", "speaker_id": "1"}, "speaker_id", 400),
    ],
)
def test_find_rejects_bad_input(api, home, payload, field, status):
    _, _, kitchen, _, _ = home
    payload = {"model_location": "local", **{k: kitchen.pk if v == "ROOM" else v for k, v in payload.items()}}
    response = api.post(FIND, payload)
    assert response.status_code == status
    assert response.json()["field"] == field
    assert not ForgetRequest.objects.exists()


def _token(api, home, speaker=None):
    _, _, kitchen, _, _ = home
    return find(api, "Vergiss den Ersatzschlüssel", kitchen, speaker).json()["token"]


def _expire():
    past = timezone.now() - timedelta(minutes=20)
    ForgetRequest.objects.update(created_at=past, expires_at=past + timedelta(minutes=10))


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
@pytest.mark.parametrize(
    ("case", "field", "status", "reason"),
    [
        ("confirm missing", "confirm", 400, "'confirm' must be true"),
        ("confirm false", "confirm", 400, "'confirm' must be true"),
        ("confirm as a string", "confirm", 400, "'confirm' must be true"),
        ("token missing", "token", 400, "'token' is required"),
        ("forged token", "token", 400, "Unknown confirmation token"),
        ("expired token", "token", 410, "expired"),
        ("reused token", "token", 409, "already used"),
        ("foreign speaker", "speaker_id", 403, "another speaker"),
        ("known speaker for an unknown speaker's token", "speaker_id", 403, "another speaker"),
        ("id outside the candidates", "memory_ids", 400, "only name candidates"),
        ("empty ids", "memory_ids", 400, "must not be empty"),
        ("ids not a list", "memory_ids", 400, "must be a list"),
        ("ids as strings", "memory_ids", 400, "must be a list"),
    ],
)
def test_forget_rejects_bad_input_and_deletes_nothing(api, home, case, field, status, reason):
    anna, ben, _, key, gate = home
    token = _token(api, home, None if case.startswith("known speaker") else anna)
    payload = {"token": token, "confirm": True, "speaker_id": anna.pk}
    if case == "reused token":
        assert api.post(FORGET, payload).status_code == 200
        MemoryFactory(content=key.content, language="de")  # were it to run again, there would be something to delete
    before = set(Memory.objects.values_list("pk", flat=True))
    tombstones_before = Tombstone.objects.count()
    match case:
        case "confirm missing":
            del payload["confirm"]
        case "confirm false":
            payload["confirm"] = False
        case "confirm as a string":
            payload["confirm"] = "true"
        case "token missing":
            del payload["token"]
        case "forged token":
            payload["token"] = token[::-1]
        case "expired token":
            _expire()
        case "foreign speaker":
            payload["speaker_id"] = ben.pk
        case "id outside the candidates":
            payload["memory_ids"] = [key.pk, gate.pk]
        case "empty ids":
            payload["memory_ids"] = []
        case "ids not a list":
            payload["memory_ids"] = key.pk
        case "ids as strings":
            payload["memory_ids"] = [str(key.pk)]
    response = api.post(FORGET, payload)
    assert response.status_code == status, response.json()
    assert response.json()["field"] == field
    assert reason in response.json()["error"]
    assert set(Memory.objects.values_list("pk", flat=True)) == before
    assert Tombstone.objects.count() == tombstones_before


@pytest.mark.meaning_blind(
    "the confirmation token and its checks; which memories a request finds is tested with both embedders"
)
def test_an_unknown_speakers_token_works_for_an_unknown_speaker(api, home):
    _, _, _, key, _ = home
    response = api.post(FORGET, {"token": _token(api, home), "confirm": True})
    assert response.status_code == 200 and response.json()["memory_ids"] == [key.pk]


@pytest.mark.meaning_blind("refused before anything is embedded")
def test_the_endpoints_need_the_bearer_token_and_post(client, api, home):
    _, _, kitchen, _, _ = home
    assert client.post(FIND, {"query": "x", "room_id": kitchen.pk}, content_type="application/json").status_code == 401
    assert client.post(FORGET, {"token": "x", "confirm": True}, content_type="application/json").status_code == 401
    assert api.get(FIND).status_code == 405 and api.get(FORGET).status_code == 405


def test_forget_removes_every_copy_the_speaker_may_see_whatever_the_count(meaning, api):
    """Copies a race or a retried request left (7 here, more than the 5 candidates) all go with the one confirmed."""
    anna, ben, kitchen = PersonFactory(), PersonFactory(), RoomFactory()
    code = "Der Code für das Gartentor ist 4711."
    copies = [MemoryFactory(content=code, language="de") for _ in range(7)]
    # A re-typed copy: a duplicate in both shipped embedders' spaces (0.996 and 0.986; with a final "!" it is not).
    near = MemoryFactory(content="der Code für das Gartentor ist 4711.", language="de")
    other_number = MemoryFactory(content="Der Code für das Gartentor ist 4712.", language="de")  # not a duplicate
    bens = MemoryFactory(content=code, language="de", scope=Scope.PRIVATE, owner=ben)  # anna may not see it
    body = find(api, "Vergiss den Code für das Gartentor", kitchen, anna).json()
    assert len(body["candidates"]) == 5
    chosen = next(c["id"] for c in body["candidates"] if c["id"] in {copy.pk for copy in copies})  # one of the copies
    response = api.post(
        FORGET, {"token": body["token"], "confirm": True, "speaker_id": anna.pk, "memory_ids": [chosen]}
    )
    assert response.status_code == 200
    gone = sorted([c.pk for c in copies] + [near.pk])
    assert response.json() == {"forgotten": 8, "memory_ids": gone}
    assert sorted(Memory.objects.values_list("pk", flat=True)) == sorted([other_number.pk, bens.pk])
    recalled = api.post(
        "/internal/v1/recall",
        {"query": "Code Gartentor", "room_id": kitchen.pk, "speaker_id": anna.pk, "model_location": "local"},
    )
    assert all(m["content"] != code for m in recalled.json()["memories"])


def test_forget_of_several_candidates_needs_the_ids_the_user_chose(meaning, api):
    """ "Forget the code" finds every code: without memory_ids nothing goes (400 naming it); with them, only those."""
    anna, kitchen = PersonFactory(), RoomFactory()
    front = MemoryFactory(content="Der Code der Haustür ist 2580.", language="de")
    back = MemoryFactory(content="Der Code der Hintertür ist 1397.", language="de")
    gate = MemoryFactory(content="Der Code für das Gartentor ist 4711.", language="de")
    body = find(api, "Vergiss den Code", kitchen, anna).json()
    assert {c["id"] for c in body["candidates"]} == {front.pk, back.pk, gate.pk}
    payload = {"token": body["token"], "confirm": True, "speaker_id": anna.pk}

    refused = api.post(FORGET, payload)
    assert refused.status_code == 400 and refused.json()["field"] == "memory_ids"
    assert "ask which" in refused.json()["error"]
    assert Memory.objects.count() == 3 and not Tombstone.objects.exists()

    done = api.post(FORGET, {**payload, "memory_ids": [gate.pk]})  # the token was not spent by the refusal
    assert done.status_code == 200 and done.json() == {"forgotten": 1, "memory_ids": [gate.pk]}
    assert sorted(Memory.objects.values_list("pk", flat=True)) == sorted([front.pk, back.pk])


@pytest.mark.meaning_blind("the tools' descriptions: nothing is embedded")
def test_the_tools_tell_the_assistant_to_ask_which(api):
    tools = {t["function"]["name"]: t["function"] for t in api.get("/internal/v1/tools").json()["tools"]}
    assert "ask which" in tools["memory_find_to_forget"]["description"]
    assert "memory_ids" in tools["memory_forget"]["description"]
    assert "Required when" in tools["memory_forget"]["parameters"]["properties"]["memory_ids"]["description"]
