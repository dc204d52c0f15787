"""What code tells the model about the turns with EXTRACTION_HINTS (transcripts.services.extraction.hints): a
relative date's day beside its phrase, a private request beside its turn, and a second question holding only a
dated or private turn the answer left out; and, on by default, a morning that is no date and an item that itself
reports gossip."""

import datetime

import pytest

from memories.models import Scope
from transcripts.services.extraction.dates import relative_dates
from transcripts.tests.test_extraction_rules import answer, extracted, household_talk, item, stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def hints(settings):
    settings.EXTRACTION_HINTS = True


TALK = (
    "Anna: Merk dir bitte: der Code für die Garage ist 4711.",
    "Marco: Nein, der Code ist jetzt 4712.",
    "Anna: Marco hat nächsten Freitag um 10 Uhr einen Zahnarzttermin.",
    "Marco: Das Geschenk für Anna liegt im Keller hinter den Skiern.",
    "Marco: Das bleibt bitte nur für mich.",
    "Anna: Lisa hat mir erzählt, dass ihr Nachbar schwer krank ist, nächsten Montag wird er operiert.",
    "A: Ok.",
)


def test_the_prompt_shows_a_relative_dates_day_and_a_private_request_beside_their_turns(fake_llm, hints):
    conversation, _ = household_talk(*TALK)
    fake_llm.reply(answer(facts=[item("Der Code für die Garage ist 4712.", [2])]))
    extracted(conversation)
    transcript = fake_llm.requests[0].messages[1]["content"]
    assert "[3] " in transcript and "nächsten Freitag (2026-03-20) um 10 Uhr" in transcript
    gift = next(line for line in transcript.splitlines() if line.startswith("[4] "))
    assert gift.endswith("hinter den Skiern. [private to Marco: still to remember]")
    # the request itself says nothing to keep: it is not marked
    assert next(line for line in transcript.splitlines() if line.startswith("[5] ")).endswith("nur für mich.")
    assert '"(YYYY-MM-DD)": write that day' in fake_llm.requests[0].messages[0]["content"]


def test_a_dated_or_private_turn_the_answer_left_out_is_asked_about_again_alone(fake_llm, hints):
    conversation, people = household_talk(*TALK)
    fake_llm.reply(answer(facts=[item("Der Code für die Garage ist 4712.", [2])], summary="Anna nannte den Code."))
    fake_llm.reply(
        answer(
            facts=[
                item("Marco hat am 2026-03-20 um 10 Uhr einen Zahnarzttermin.", [3]),
                item("Das Geschenk für Anna liegt im Keller hinter den Skiern.", [4]),
            ]
        )
    )
    extracted(conversation)
    first, second = fake_llm.requests
    # the same system rules (the server's cached prefix); the transcript only the left-out turns, as shown
    assert second.messages[0] == first.messages[0]
    transcript = second.messages[1]["content"]
    lines = [line for line in transcript.splitlines() if line.startswith("[")]
    assert [line.split(" ", 1)[0] for line in lines] == ["[3]", "[4]"]
    assert "nächsten Freitag (2026-03-20)" in lines[0] and "[private to Marco: still to remember]" in lines[1]
    assert "do not write these again):\n- Der Code für die Garage ist 4712." in transcript
    memories = stored()
    assert set(memories) == {
        "Anna nannte den Code.",  # the first answer's summary: the second's is asked empty
        "Der Code für die Garage ist 4712.",
        "Marco hat am 2026-03-20 um 10 Uhr einen Zahnarzttermin.",
        "Das Geschenk für Anna liegt im Keller hinter den Skiern.",
    }
    gift = memories["Das Geschenk für Anna liegt im Keller hinter den Skiern."]
    assert (gift.scope, gift.owner_id) == (Scope.PRIVATE, people["Marco"].pk)
    assert memories["Der Code für die Garage ist 4712."].scope == Scope.SHARED


def test_no_second_question_when_the_answer_cites_every_dated_and_private_turn(fake_llm, hints):
    conversation, _ = household_talk(*TALK)
    fake_llm.reply(
        answer(
            facts=[
                item("Marco hat am 2026-03-20 einen Zahnarzttermin.", [3]),
                item("Das Geschenk für Anna liegt im Keller.", [4]),
            ]
        )
    )
    extracted(conversation)
    assert len(fake_llm.requests) == 1


def test_without_the_setting_the_prompt_has_no_marks_and_one_question_is_asked(fake_llm):
    conversation, _ = household_talk(*TALK)
    fake_llm.reply(answer(facts=[item("Der Code für die Garage ist 4712.", [2])]))
    extracted(conversation)
    [request] = fake_llm.requests
    assert "nächsten Freitag um 10 Uhr" in request.prompt and "[private to" not in request.prompt
    assert "Resolve relative dates" in request.prompt and "(YYYY-MM-DD)" not in request.prompt


def test_a_morning_is_no_date_in_the_hint_nor_in_the_item():
    today = datetime.date(2026, 3, 14)
    assert relative_dates("Ich trinke am Morgen grünen Tee, vom Morgen bis Mittag.", today=today, language="de") == []
    [span] = relative_dates("Morgen früh kommt der Klempner.", today=today, language="de")
    assert span.day == datetime.date(2026, 3, 15)


def test_an_item_that_itself_reports_gossip_is_dropped_whatever_turn_it_cites(fake_llm):
    conversation, _ = household_talk(
        "Carmen: El código de la alarma es 6042.",
        "Carmen: La vecina del quinto dice que su hija está embarazada.",
        "Giulia: La signora del terzo piano ha litigato col marito, dicono che si separano.",
        "A: Vale.",
    )
    fake_llm.reply(
        answer(
            facts=[
                item("El código de la alarma es 6042.", [1]),
                item("La vecina del quinto dice que su hija está embarazada.", [1]),
                item("La signora del terzo piano ha litigato col marito, dicono che si separano.", [3]),
            ]
        )
    )
    stats = extracted(conversation)
    assert set(stored()) == {"El código de la alarma es 6042."}
    gossip = {"path": "answer.items[1]", "rule": "hearsay about another person's private life"}
    assert gossip in stats["rejected"] and {**gossip, "path": "answer.items[2]"} in stats["rejected"]


def test_a_nope_corrects_a_code_and_a_moved_weekday_corrects_a_resolved_date(fake_llm):
    conversation, _ = household_talk(
        "Donna: The garage door code is 8162.",
        "A: 8162.",
        "Greg: Nope, I reset it on Sunday, it's 8126 now.",
        "Sam: Oh, and the boiler service is on Tuesday at eleven.",
        "A: Tuesday the 17th at 11.",
        "Sam: Actually no, they moved it to Wednesday, same time.",
    )
    fake_llm.reply(
        answer(
            facts=[
                item("The garage door code is 8162.", [1]),
                item("The boiler service is on 2026-03-17 at 11.", [4]),
            ]
        )
    )
    extracted(conversation)
    assert set(stored()) == {"The garage door code is 8126.", "The boiler service is on 2026-03-18 at 11."}
