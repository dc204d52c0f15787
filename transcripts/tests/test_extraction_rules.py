"""What code reads from the turns before anything is stored: corrections, relative dates, numbers said in words,
who said it, a private request, a request not to remember, questions, gossip, loops (transcripts.services.extraction.rules)."""

import json
from datetime import UTC, datetime, timedelta

import pytest

from memories.caller import Caller
from memories.models import Memory, Provenance, Scope
from memories.services.recall import memory_recall
from people.tests.factories import PersonFactory, RoomFactory
from transcripts.models import Conversation, ExtractionStatus
from transcripts.selectors import memory_said
from transcripts.services.extraction.run import conversation_extract
from transcripts.services.rerun import conversations_extract_rerun
from transcripts.tests.factories import ConversationFactory, TurnFactory
from transcripts.tests.helpers import memory_role

pytestmark = pytest.mark.django_db

SATURDAY = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def item(content, turns, **fields):
    return {"content": content, "turns": turns, "inferred": False, "about": "", **fields}


def answer(*, facts=(), preferences=(), summary=""):
    return json.dumps({"facts": list(facts), "preferences": list(preferences), "summary": {"content": summary}})


def household_talk(*lines, speaker=None):
    """A conversation of Saturday 2026-03-14 with these turns ("Name: text" a person, "A: text" the assistant)."""
    people = {}
    conversation = ConversationFactory(speaker=speaker, room=RoomFactory(), started_at=SATURDAY)
    for line in lines:
        who, text = line.split(": ", 1)
        if who == "A":
            TurnFactory(conversation=conversation, role="assistant", text=text)
        else:
            person = people.get(who) or PersonFactory(name=who)
            people[who] = person
            TurnFactory(conversation=conversation, role="user", speaker=person, text=text)
    Conversation.objects.filter(pk=conversation.pk).update(
        ended_at=SATURDAY + timedelta(minutes=5), extraction_status=ExtractionStatus.QUEUED
    )
    return conversation, people


def learned_from(memory: Memory) -> list[str]:
    conversation = Conversation.objects.get(pk=int(memory.source_ref.split(":")[1]))
    return [
        said["sentence"] for said in memory_said(memory_id=memory.pk, conversation=conversation, content=memory.content)
    ]


def stored() -> dict[str, Memory]:
    return {memory.content: memory for memory in Memory.objects.all()}


def extracted(conversation) -> dict:
    conversation_extract(conversation_id=conversation.pk)
    conversation.refresh_from_db()
    assert conversation.extraction_status == "done"
    return conversation.extraction_stats


def test_the_later_of_a_value_and_its_correction_wins_in_items_and_summary(fake_llm):
    conversation, _ = household_talk(
        "Anna: Merk dir bitte: der Code für die Garage ist 4711.",
        "A: Notiert: 4711.",
        "Marco: Nein, den haben wir geändert, der Code ist jetzt 4712.",
        "A: Danke, ich merke mir 4712.",
    )
    fake_llm.reply(
        answer(
            facts=[item("Der Code für die Garage ist 4711.", [1])],
            summary="Anna nannte den Garagencode 4711.",
        )
    )
    extracted(conversation)
    contents = set(stored())
    assert contents == {"Der Code für die Garage ist 4712.", "Anna nannte den Garagencode 4712."}
    assert not any("4711" in content for content in contents)


def test_a_value_corrected_in_the_same_breath_is_stored_corrected(fake_llm):
    conversation, _ = household_talk("Lena: Der WLAN-Code ist 2468, nein, jetzt 1357.", "A: Notiert.")
    fake_llm.reply(answer(facts=[item("Der WLAN-Code ist 2468.", [1])]))
    extracted(conversation)
    assert set(stored()) == {"Der WLAN-Code ist 1357."}


def test_an_item_that_cites_the_assistants_echo_of_a_value_is_grounded_in_the_user_turn_that_said_it(fake_llm):
    conversation, _ = household_talk("Ben: The alarm code is 5892.", "A: Noted: 5892.")
    fake_llm.reply(answer(facts=[item("The alarm code is 5892.", [2])]))
    stats = extracted(conversation)
    memory = stored()["The alarm code is 5892."]
    assert learned_from(memory) == ["The alarm code is 5892."]
    assert stats["ungrounded"] == 0


@pytest.mark.parametrize(
    ("language", "said", "content", "day"),
    [
        (
            "de",
            "Marco hat nächsten Freitag um 10 Uhr einen Zahnarzttermin.",
            "Marco hat nächsten Freitag um 10 Uhr einen Zahnarzttermin.",
            "2026-03-20",
        ),
        ("de", "Übermorgen kommt der Klempner.", "Übermorgen kommt der Klempner.", "2026-03-16"),
        ("it", "Il tecnico viene giovedì della settimana prossima.", "Il tecnico viene il 2026-03-26.", "2026-03-19"),
        ("en", "The piano tuner comes a week on Saturday.", "The piano tuner comes a week on Saturday.", "2026-03-28"),
        ("es", "El fontanero viene el martes que viene.", "El fontanero viene el martes que viene.", "2026-03-17"),
    ],
)
def test_a_relative_date_is_resolved_in_code_against_the_conversations_date(fake_llm, language, said, content, day):
    conversation, _ = household_talk(f"Marco: {said}", "A: Ok.")
    Conversation.objects.filter(pk=conversation.pk).update(language=language)
    fake_llm.reply(answer(facts=[item(content, [1])]))  # the phrase copied, or a wrong day written
    extracted(conversation)
    [memory] = stored().values()
    assert day in memory.content


def test_a_number_said_in_words_grounds_an_item_that_writes_it_in_digits(fake_llm):
    conversation, _ = household_talk("Giulia: Il codice del cancello è otto quattro due sette.", "A: Ok.")
    fake_llm.reply(answer(facts=[item("Il codice del cancello è 8427.", [1])]))
    stats = extracted(conversation)
    assert set(stored()) == {"Il codice del cancello è 8427."} and stats["ungrounded"] == 0


def test_first_person_becomes_the_speakers_name_and_a_dislike_goes_to_whom_said_it(fake_llm):
    conversation, _ = household_talk(
        "Anna: Marco, trinkst du noch Kaffee?",
        "Marco: Ich trinke keinen Kaffee mehr, nur noch Tee.",
        "Marco: Und ich mag keinen Koriander.",
        "A: Verstanden.",
    )
    fake_llm.reply(
        answer(
            preferences=[
                item("Ich trinke keinen Kaffee mehr, nur noch Tee.", [2]),
                item("Anna mag keinen Koriander.", [3], about="Anna"),
            ]
        )
    )
    extracted(conversation)
    assert set(stored()) == {"Marco: Ich trinke keinen Kaffee mehr, nur noch Tee.", "Marco mag keinen Koriander."}


@pytest.mark.parametrize(
    "request_text",
    ["Das ist nur für mich.", "Keep this between us.", "Tienilo per te.", "Que quede entre nosotros."],
)
def test_what_a_person_asks_to_keep_to_themselves_is_private_to_that_person(fake_llm, request_text):
    anna = PersonFactory(name="Anna")
    conversation, people = household_talk(
        "Marco: Das Geschenk für Anna liegt im Keller hinter den Skiern.",
        f"Marco: {request_text}",
        "A: Ok.",
        speaker=anna,
    )
    fake_llm.reply(answer(facts=[item("Das Geschenk für Anna liegt im Keller hinter den Skiern.", [1])]))
    extracted(conversation)
    [memory] = stored().values()
    assert (memory.scope, memory.owner_id) == (Scope.PRIVATE, people["Marco"].pk)


def test_gossip_is_not_stored_while_a_household_matter_heard_second_hand_is(fake_llm):
    conversation, _ = household_talk(
        "Anna: Lisa hat mir erzählt, dass Paolo krank ist und sich von seiner Frau trennt.",
        "Anna: Mama sagt, der Klempner kommt am Dienstag.",
        "A: Ok.",
    )
    fake_llm.reply(
        answer(
            facts=[
                item("Paolo ist krank und trennt sich von seiner Frau.", [1]),
                item("Der Klempner kommt am Dienstag.", [2]),
            ]
        )
    )
    stats = extracted(conversation)
    assert set(stored()) == {"Der Klempner kommt am 2026-03-17."}
    assert {"path": "answer.items[0]", "rule": "hearsay about another person's private life"} in stats["rejected"]


def test_what_a_person_asks_not_to_remember_and_a_question_are_not_stored(fake_llm):
    conversation, _ = household_talk(
        "Ben: The spare key is under the blue pot.",
        "Ben: Actually, don't remember that, I'll move it.",
        "Ben: Is the weather nice today?",
        "A: Sunny, 15 degrees.",
        "Ben: The bins go out on Wednesdays.",
    )
    fake_llm.reply(
        answer(
            facts=[
                item("The spare key is under the blue pot.", [1]),
                item("The weather is nice today.", [3]),
                item("The bins go out on Wednesdays.", [5]),
            ]
        )
    )
    stats = extracted(conversation)
    assert set(stored()) == {"The bins go out on Wednesdays."}
    assert {r["rule"] for r in stats["rejected"]} == {"a person asked not to remember it", "cites only questions"}


def test_a_summary_that_loops_is_cut_to_what_it_says_once_and_says_where_it_was_learned(fake_llm):
    conversation, _ = household_talk("Anna: Der Müll wird ab jetzt mittwochs abgeholt.", "A: Ist notiert.")
    looping = "Anna sprach über den Müll. " * 40
    fake_llm.reply(answer(facts=[item("Der Müll wird mittwochs abgeholt.", [1])], summary=looping))
    extracted(conversation)
    summary = Memory.objects.get(kind="episode")
    assert summary.content == "Anna sprach über den Müll."
    assert learned_from(summary) == ["Der Müll wird ab jetzt mittwochs abgeholt."]


def test_learned_from_survives_a_re_extraction(fake_llm, run_jobs, django_capture_on_commit_callbacks):
    conversation, _ = household_talk("Anna: Die Katze heißt Minka.", "Anna: Der Müll wird mittwochs abgeholt.")
    fake_llm.reply(answer(facts=[item("Die Katze heißt Minka.", [1]), item("Der Müll wird mittwochs abgeholt.", [2])]))
    extracted(conversation)
    cat = stored()["Die Katze heißt Minka."]
    fake_llm.reply(answer(facts=[item("Der Müll wird mittwochs abgeholt.", [2])]))  # this time the cat is missed
    with django_capture_on_commit_callbacks(execute=True):
        conversations_extract_rerun(conversation_ids=[conversation.pk])
    run_jobs()
    conversation.refresh_from_db()
    assert conversation.extraction_status == "done" and conversation.extraction_attempts == 1
    assert learned_from(cat) == ["Die Katze heißt Minka."]


def test_a_long_conversation_is_asked_a_few_turns_at_a_time_with_what_was_noted(fake_llm, settings):
    settings.EXTRACTION_WINDOW_USER_TURNS = 2
    conversation, _ = household_talk(
        "Anna: Die Katze heißt Minka.", "Anna: Der Müll wird mittwochs abgeholt.", "Anna: Die Pflanzen gießt Tom."
    )
    fake_llm.reply(answer(facts=[item("Die Katze heißt Minka.", [1])]))
    fake_llm.reply(answer(facts=[item("Die Pflanzen gießt Tom.", [3]), item("Die Katze heißt Minka.", [1])]))
    stats = extracted(conversation)
    first, second = (request.prompt for request in fake_llm.requests)
    assert "[3]" not in first and "[3]" in second
    assert "Already noted from the earlier turns (do not write these again):\n- Die Katze heißt Minka." in second
    assert (stats["created"], stats["repeats"]) == (2, 1)


@pytest.mark.parametrize(("provider", "field"), [("embedded", "repeat_penalty"), ("ollama", "frequency_penalty")])
def test_a_repetition_penalty_is_sent_where_the_server_takes_one(fake_llm, settings, provider, field):
    settings.AI_ROLES = {"memory": memory_role(fake_llm.base_url, provider=provider)}
    conversation, _ = household_talk("Anna: Die Katze heißt Minka.")
    extracted(conversation)
    assert field in fake_llm.requests[0].body


def test_an_item_about_the_person_a_turn_names_is_not_given_to_its_speaker_and_a_hypothetical_is_dropped(fake_llm):
    conversation, _ = household_talk(
        "Anna: Marco hat nächsten Freitag um 10 Uhr einen Zahnarzttermin.",
        "Marco: Stimmt.",
        "Anna: Wenn wir irgendwann ein zweites Auto hätten, bräuchten wir einen größeren Stellplatz.",
    )
    fake_llm.reply(
        answer(
            facts=[
                item("Anna hat am 2026-03-20 um 10 Uhr einen Zahnarzttermin.", [1], about="Anna"),
                item("Mit einem zweiten Auto bräuchten sie einen größeren Stellplatz.", [3]),
            ]
        )
    )
    stats = extracted(conversation)
    assert set(stored()) == {"Marco hat am 2026-03-20 um 10 Uhr einen Zahnarzttermin."}
    assert {r["rule"] for r in stats["rejected"]} == {"cites only hypotheticals"}


def test_the_bundled_smoke_test_model_is_asked_but_nothing_is_stored_and_health_says_how_to_get_a_real_one(
    fake_llm, settings
):
    from justai_memory.edge.health import llm_status

    settings.AI_ROLES = {"memory": memory_role(fake_llm.base_url, provider="embedded")}
    settings.AI_MEMORY_SMOKE_MODEL = True
    conversation, _ = household_talk("Anna: Die Katze heißt Minka.")
    fake_llm.reply(answer(facts=[item("Die Katze heißt Minka.", [1])]))
    stats = extracted(conversation)
    assert not Memory.objects.exists() and stats["extracted"] == 1 and "smoke-test model" in stats["stored"]
    assert "manage.py fetch_model" in llm_status(database_ok=True)["hint"]
    settings.AI_MEMORY_SMOKE_MODEL = False  # a real model learns
    conversation, _ = household_talk("Ben: The cat is called Minka.")
    fake_llm.reply(answer(facts=[item("The cat is called Minka.", [1])]))
    extracted(conversation)
    assert list(Memory.objects.values_list("content", flat=True)) == ["The cat is called Minka."]


def test_a_near_copy_of_the_worked_example_is_dropped_as_a_copy(fake_llm):
    conversation, _ = household_talk("Anna: Der Müll wird mittwochs abgeholt.")
    fake_llm.reply(
        answer(facts=[item("Der Müll wird mittwochs abgeholt.", [1])], preferences=[item("Lena mag Fisch nicht.", [1])])
    )
    stats = extracted(conversation)
    assert set(stored()) == {"Der Müll wird mittwochs abgeholt."}
    assert {r["rule"] for r in stats["rejected"]} == {"restates the prompt's worked example"}


def test_an_english_first_person_turn_gives_its_item_to_whom_said_it(fake_llm):
    conversation, _ = household_talk("Emma: Morning!", "Ben: I don't eat meat anymore, by the way.")
    fake_llm.reply(answer(preferences=[item("Emma does not eat meat anymore.", [2], about="Emma")]))
    extracted(conversation)
    assert set(stored()) == {"Ben does not eat meat anymore."}


def recalled(query: str, conversation, speaker) -> list[str]:
    caller = Caller(room=conversation.room, speaker=speaker, model_location="local", language="de")
    return [memory.content for memory in memory_recall(query=query, caller=caller).memories]


@pytest.mark.parametrize(
    "request_text",
    ["Das bleibt bitte nur für mich.", "Keep this between us.", "Tienilo per te.", "Que quede entre nosotros."],
)
def test_a_private_turn_the_answer_leaves_out_is_stored_by_code_private_to_its_speaker(fake_llm, request_text):
    conversation, people = household_talk(
        "Anna: Der Code für die Garage ist 4712.",
        "Marco: Ja, bitte. Das Geschenk für Anna liegt im Keller hinter den Skiern.",
        f"Marco: {request_text}",
        "A: Verstanden.",
    )
    fake_llm.reply(answer(facts=[item("Der Code für die Garage ist 4712.", [1])]))  # the private turn left out
    extracted(conversation)
    gift = stored()["Marco: Das Geschenk für Anna liegt im Keller hinter den Skiern."]
    assert (gift.scope, gift.owner_id, gift.provenance) == (Scope.PRIVATE, people["Marco"].pk, Provenance.INFERRED)
    assert gift.confidence <= 0.5
    assert learned_from(gift) == ["Das Geschenk für Anna liegt im Keller hinter den Skiern."]  # its turn's sentence
    assert stored()["Der Code für die Garage ist 4712."].scope == Scope.SHARED


def test_codes_private_item_is_recalled_for_its_speaker_only(e5, fake_llm):
    conversation, people = household_talk(
        "Anna: Der Code für die Garage ist 4712.",
        "Marco: Das bleibt unter uns: ich habe nächsten Freitag ein Vorstellungsgespräch bei Siemens.",
        "A: Verstanden.",
    )
    fake_llm.reply(answer(facts=[item("Der Code für die Garage ist 4712.", [1])]))
    extracted(conversation)
    [interview] = [content for content in stored() if "Siemens" in content]
    assert interview.startswith("Marco") and "2026-03-20" in interview, interview  # first person, the date resolved
    query = "Wann hat Marco das Vorstellungsgespräch bei Siemens?"
    assert interview in recalled(query, conversation, people["Marco"])
    assert interview not in recalled(query, conversation, people["Anna"])
    assert interview not in recalled(query, conversation, None)


def test_a_private_request_that_asks_supposes_or_gossips_makes_no_item(fake_llm):
    conversation, people = household_talk(
        "Marco: Tra noi: il regalo per Anna è in cantina?",
        "Marco: Keep this between us: if we ever had a second car I would buy a red one.",
        "Marco: Das bleibt unter uns: Lisa hat mir erzählt, dass ihr Nachbar schwer krank ist.",
        "Marco: Entre nosotros, el regalo de Anna está en el sótano detrás de los esquís.",
        "A: Ok.",
    )
    fake_llm.reply(answer())
    extracted(conversation)
    [(content, memory)] = stored().items()
    assert "sótano" in content and (memory.scope, memory.owner_id) == (Scope.PRIVATE, people["Marco"].pk)


def test_a_private_turn_the_answer_covers_is_not_stored_twice(fake_llm):
    conversation, _ = household_talk(
        "Marco: Das bleibt unter uns: das Geschenk für Anna liegt im Keller hinter den Skiern.",
        "Anna: Keep this between us: the spare key for Marco's bike is in the blue box.",
        "A: Ok.",
    )
    fake_llm.reply(answer(facts=[item("Das Geschenk für Anna liegt im Keller hinter den Skiern.", [1])]))
    extracted(conversation)
    memories = sorted(stored().values(), key=lambda memory: memory.owner.name)
    assert [(memory.owner.name, memory.scope) for memory in memories] == [
        ("Anna", Scope.PRIVATE),
        ("Marco", Scope.PRIVATE),
    ], list(stored())
    assert "blue box" in memories[0].content and memories[1].content.startswith("Das Geschenk")


def test_a_private_request_that_says_something_keeps_that_and_not_its_speakers_turn_before(fake_llm):
    conversation, people = household_talk(
        "Olivia: Our share of the internet bill is 18 pounds each a month.",
        "Olivia: Keep this between us: I'm interviewing for a job in Leeds.",
        "A: That stays between us.",
    )
    fake_llm.reply(answer(facts=[item("Our share of the internet bill is 18 pounds each a month.", [1])]))
    extracted(conversation)
    memories = stored()
    assert memories["Our share of the internet bill is 18 pounds each a month."].scope == Scope.SHARED
    interview = memories["Olivia: I'm interviewing for a job in Leeds."]
    assert (interview.scope, interview.owner_id) == (Scope.PRIVATE, people["Olivia"].pk)
