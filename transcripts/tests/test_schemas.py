"""The extraction answer's pydantic models: what passes, what is dropped per item, what fails, and that reasons never carry content."""

import json

import pytest

from transcripts.schemas import (
    EXTRACTION_SCHEMA,
    MAX_ITEMS,
    AnswerItem,
    ExtractionAnswer,
    MalformedAnswer,
    extraction_parse,
)
from transcripts.tests.fake_llm import extraction_answer


def parse(data):
    return extraction_parse(text=data if isinstance(data, str) else json.dumps(data))


def test_a_valid_answer_becomes_items_and_a_summary():
    answer = extraction_answer(
        facts=[{"content": "Der Kellerschlüssel liegt in der blauen Dose.", "subject": "Kellerschlüssel"}],
        preferences=[{"content": "Anna mag kurze Antworten.", "scope": "private", "about_speaker": True}],
        summary="Anna fragte nach dem Kellerschlüssel.",
    )
    extraction = parse(answer)
    assert [(i.kind, i.scope, i.about_speaker, i.inferred) for i in extraction.items] == [
        ("fact", "shared", False, False),
        ("preference", "private", True, False),
    ]
    assert extraction.items[0].subject == "Kellerschlüssel"
    assert extraction.summary.kind == "episode" and extraction.summary.content.startswith("Anna fragte")
    assert extraction.rejected == []


def test_a_guess_is_marked_inferred():
    extraction = parse(extraction_answer(facts=[{"content": "Anna hat wohl einen Hund.", "inferred": True}]))
    assert extraction.items[0].inferred is True


def test_the_schema_is_generated_from_the_model_and_has_no_references():
    assert EXTRACTION_SCHEMA["required"] == ["facts", "preferences", "summary"]
    item = EXTRACTION_SCHEMA["properties"]["facts"]["items"]
    assert item["additionalProperties"] is False and "inferred" in item["required"]
    assert item["properties"]["confidence"] == {"maximum": 1, "minimum": 0, "title": "Confidence", "type": "number"}
    assert EXTRACTION_SCHEMA["properties"]["facts"]["maxItems"] == MAX_ITEMS
    assert "$ref" not in json.dumps(EXTRACTION_SCHEMA) and "$defs" not in EXTRACTION_SCHEMA
    assert set(item["properties"]) == set(AnswerItem.model_fields)
    assert set(EXTRACTION_SCHEMA["properties"]) == set(ExtractionAnswer.model_fields)


def test_an_empty_summary_means_none_and_a_markdown_fence_is_tolerated():
    extraction = parse("```json\n" + extraction_answer(facts=["Das Tor ist grün."]) + "\n```")
    assert extraction.summary is None and len(extraction.items) == 1


def test_unknown_keys_are_ignored():
    data = json.loads(extraction_answer(facts=["Das Tor ist grün."]))
    data["reasoning"] = "..."
    data["facts"][0]["source"] = "user"
    data["facts"][0]["language"] = "de"
    assert len(parse(data).items) == 1


def answer_with(mutate):
    data = json.loads(
        extraction_answer(facts=["Der Code ist 4711.", "Das Tor ist grün."], preferences=["Anna mag Tee."])
    )
    mutate(data)
    return data


@pytest.mark.parametrize(
    ("mutate", "path", "rule"),
    [
        (lambda d: d["facts"][0].pop("predicate"), "answer.facts[0].predicate", "Field required"),
        (lambda d: d["facts"][0].pop("inferred"), "answer.facts[0].inferred", "Field required"),
        (lambda d: d["facts"][0].update(inferred="yes"), "answer.facts[0].inferred", "valid boolean"),
        (lambda d: d["facts"][0].update(content="  "), "answer.facts[0].content", "at least 1 character"),
        (lambda d: d["facts"][0].update(confidence=1.5), "answer.facts[0].confidence", "less than or equal to 1"),
        (lambda d: d["facts"][0].update(importance="high"), "answer.facts[0].importance", "valid number"),
        (lambda d: d["facts"][0].update(confidence=True), "answer.facts[0].confidence", "valid number"),
        (lambda d: d["preferences"][0].update(scope="everyone"), "answer.preferences[0].scope", "'private'"),
        (lambda d: d["facts"][0].update(content="x" * 1001 + "4711"), "answer.facts[0].content", "at most 1000"),
        (lambda d: d["facts"].__setitem__(0, "Der Code ist 4711."), "answer.facts[0]", "valid dictionary"),
        (lambda d: d["summary"].update(importance=2), "answer.summary.importance", "less than or equal to 1"),
    ],
)
def test_a_malformed_item_is_dropped_and_reported_by_path_and_rule_never_content(mutate, path, rule):
    extraction = parse(answer_with(mutate))
    [rejection] = extraction.rejected
    assert rejection.path == path and rule in rejection.rule
    assert "4711" not in json.dumps(rejection.as_dict()) and "Tee" not in rejection.rule
    dropped_summary = path.startswith("answer.summary")
    assert len(extraction.items) == (3 if dropped_summary else 2)  # the others are kept


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda d: d.pop("summary"), "answer.summary: Field required"),
        (lambda d: d.update(facts={}), "answer.facts: Input should be a valid list"),
        (lambda d: d.update(summary="4711"), "answer.summary: Input should be a valid dictionary"),
        (lambda d: d.update(facts=d["facts"] * (MAX_ITEMS // 2 + 1)), f"at most {MAX_ITEMS} items"),
    ],
)
def test_an_answer_wrong_at_the_top_level_is_malformed_with_a_text_free_reason(mutate, reason):
    with pytest.raises(MalformedAnswer) as error:
        parse(answer_with(mutate))
    assert reason in str(error.value)
    assert "4711" not in str(error.value) and "Tee" not in str(error.value)


@pytest.mark.parametrize("text", ["", "Sure! Here are the facts: the code is 4711", "[1, 2]", '{"facts": [}'])
def test_text_that_is_not_a_json_object_is_rejected(text):
    with pytest.raises(MalformedAnswer) as error:
        parse(text)
    assert "4711" not in str(error.value)


def test_every_top_level_error_is_named_and_more_than_three_are_counted(monkeypatch):
    data = {"facts": 1, "preferences": 2, "summary": 3}
    with pytest.raises(MalformedAnswer) as error:
        parse(data)
    assert str(error.value).count("; ") == 2
    monkeypatch.setattr("transcripts.schemas.MAX_REASONS", 1)
    with pytest.raises(MalformedAnswer, match=r"^answer.facts: Input should be a valid list \(\+2 more\)$"):
        parse(data)
