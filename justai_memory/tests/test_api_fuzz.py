"""Whatever JSON a caller sends, the internal API answers JSON and never a 5xx (property test)."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from people.tests.factories import PersonFactory, RoomFactory
from transcripts.tests.factories import ConversationFactory

pytestmark = pytest.mark.django_db

# Every field each endpoint reads; the values below are thrown at them.
ENDPOINTS = {
    "/internal/v1/recall": ["query", "room_id", "speaker_id", "conversation_id", "limit"],
    "/internal/v1/memories/remember": [
        "content",
        "room_id",
        "speaker_id",
        "conversation_id",
        "language",
        "scope",
        "kind",
        "about_id",
    ],
    "/internal/v1/memories/find_to_forget": ["query", "room_id", "speaker_id"],
    "/internal/v1/memories/forget": ["token", "confirm", "speaker_id", "memory_ids"],
    "/internal/v1/memories/observe": ["content", "language", "kind", "scope", "owner_id", "confidence", "importance"],
    "/internal/v1/conversations": ["room_id", "speaker_id", "language", "model_location"],
    "/internal/v1/conversations/CONVERSATION/turns": ["turns"],
    "/internal/v1/sightings": ["person_id", "room_id", "seen_at"],
    "/internal/v1/events": ["kind", "payload", "room_id", "person_id", "occurred_at"],
}

texts = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", "  ", "\u0000", "\ud800", "de", "shared", "private", "user", "2025-02-30T10:00", "1e999"]),
    st.text(min_size=3990, max_size=4010, alphabet="ab "),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(["ROOM", "PERSON", "CONVERSATION", 1, 0, -1]),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
)
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4), max_leaves=12
)


@pytest.fixture
def ids():
    room, person = RoomFactory(), PersonFactory()
    return {"ROOM": room.pk, "PERSON": person.pk, "CONVERSATION": ConversationFactory(room=room, speaker=person).pk}


def _resolve(value, ids):
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_resolve(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, ids) for k, v in value.items()}
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_json_gets_a_json_answer_below_500(api, ids, data):
    path = data.draw(st.sampled_from(sorted(ENDPOINTS)))
    fields = ENDPOINTS[path]
    body = data.draw(st.dictionaries(st.sampled_from(fields), values, max_size=len(fields)))
    response = api.post(path.replace("CONVERSATION", str(ids["CONVERSATION"])), _resolve(body, ids))
    assert response.status_code < 500, (path, response.content[:300])
    answer = json.loads(response.content)
    if response.status_code >= 400:
        assert set(answer) == {"error", "field"} and answer["error"]
