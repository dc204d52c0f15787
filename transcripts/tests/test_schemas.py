"""The extraction answer's schema: what passes, what fails, and that reasons never carry content."""

import json

import pytest

from transcripts.schemas import MAX_ITEMS, MalformedAnswer, extraction_parse
from transcripts.tests.fake_llm import extraction_answer


def parse(data, language="de"):
    text = data if isinstance(data, str) else json.dumps(data)
    return extraction_parse(text=text, language=language)


def test_a_valid_answer_becomes_items_and_a_summary():
    answer = extraction_answer(
        facts=[{"content": "Der Kellerschlüssel liegt in der blauen Dose.", "subject": "Kellerschlüssel"}],
        preferences=[{"content": "Anna mag kurze Antworten.", "scope": "private", "about_speaker": True}],
        summary="Anna fragte nach dem Kellerschlüssel.",
    )
    extraction = parse(answer)
    assert [(i.kind, i.scope, i.about_speaker) for i in extraction.items] == [
        ("fact", "shared", False),
        ("preference", "private", True),
    ]
    assert extraction.items[0].subject == "Kellerschlüssel"
    assert extraction.summary.kind == "episode" and extraction.summary.content.startswith("Anna fragte")


def test_an_empty_summary_means_none_and_a_markdown_fence_is_tolerated():
    extraction = parse("```json\n" + extraction_answer(facts=["Das Tor ist grün."]) + "\n```")
    assert extraction.summary is None and len(extraction.items) == 1


def test_unknown_keys_are_ignored():
    data = json.loads(extraction_answer(facts=["Das Tor ist grün."]))
    data["reasoning"] = "..."
    data["facts"][0]["source"] = "user"
    assert len(parse(data).items) == 1


def bad(mutate):
    data = json.loads(extraction_answer(facts=["Der Code ist 4711."], preferences=["Anna mag Tee 4711."]))
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.pop("summary"), "answer.summary: missing"),
        (lambda d: d.update(facts={}), "answer.facts: not an array"),
        (lambda d: d["facts"][0].pop("predicate"), "answer.facts[0].predicate: missing"),
        (lambda d: d["facts"][0].update(content="  "), "answer.facts[0].content: empty"),
        (lambda d: d["facts"][0].update(confidence=1.5), "answer.facts[0].confidence: above maximum 1"),
        (lambda d: d["facts"][0].update(importance="high"), "answer.facts[0].importance: not a number"),
        (lambda d: d["facts"][0].update(confidence=True), "answer.facts[0].confidence: not a number"),
        (lambda d: d["preferences"][0].update(scope="everyone"), "answer.preferences[0].scope: not one of"),
        (lambda d: d["facts"][0].update(language="German"), "answer.facts[0].language: does not match"),
        (lambda d: d["facts"][0].update(language="en"), "answer.facts[0].language: not the conversation's"),
        (lambda d: d["summary"].update(content="Sie sprachen.", language="en"), "answer.summary.language"),
        (lambda d: d["facts"][0].update(content="x" * 1001), "answer.facts[0].content: longer than 1000"),
        (lambda d: d.update(facts=d["facts"] * (MAX_ITEMS + 1)), f"more than {MAX_ITEMS} items"),
    ],
)
def test_a_malformed_answer_is_rejected_with_a_reason_that_names_the_path_not_the_content(mutate, reason):
    with pytest.raises(MalformedAnswer) as error:
        parse(bad(mutate))
    assert reason in str(error.value)
    assert "4711" not in str(error.value) and "Tee" not in str(error.value)


@pytest.mark.parametrize("text", ["", "Sure! Here are the facts: the code is 4711", "[1, 2]", '{"facts": [}'])
def test_text_that_is_not_a_json_object_is_rejected(text):
    with pytest.raises(MalformedAnswer) as error:
        parse(text)
    assert "4711" not in str(error.value)


def test_many_errors_are_cut_to_three_and_counted():
    data = json.loads(extraction_answer(facts=["a"] * 6))
    for item in data["facts"]:
        item["confidence"] = 9
    with pytest.raises(MalformedAnswer, match=r"\(\+3 more\)"):
        parse(data)
