"""The extraction answer's pydantic models: what passes, what is dropped per item, what fails, and that reasons never carry content."""

import json

import pytest

from transcripts.schemas import (
    EXTRACTION_SCHEMA,
    LIST_KEYS,
    MAX_ITEM_CHARS,
    MAX_ITEMS,
    AnswerItem,
    MalformedAnswer,
    answer_max_tokens,
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
        ("fact", "shared", None, False),  # None: left to the rules
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
    assert item["additionalProperties"] is False
    # only what the model must judge: the rest comes from rules in code
    assert item["required"] == ["content", "turns", "inferred", "about"] == list(item["properties"])
    assert item["properties"]["turns"]["items"] == {"maximum": 10000, "minimum": 1, "type": "integer"}
    assert EXTRACTION_SCHEMA["properties"]["summary"]["required"] == ["content"]
    assert EXTRACTION_SCHEMA["properties"]["facts"]["maxItems"] == MAX_ITEMS
    assert "$ref" not in json.dumps(EXTRACTION_SCHEMA) and "$defs" not in EXTRACTION_SCHEMA
    assert set(item["properties"]) < set(AnswerItem.model_fields)
    assert set(EXTRACTION_SCHEMA["properties"]) == {*LIST_KEYS, "summary"}  # what extraction_parse reads


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
        (lambda d: d["facts"][0].update(turns=[0]), "answer.facts[0].turns[0]", "greater than or equal to 1"),
        (lambda d: d["facts"][0].update(turns="3"), "answer.facts[0].turns", "valid list"),
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
        (lambda d: d.update(preferences={}), "answer.preferences: Input should be a valid list"),
        (lambda d: d.update(summary="4711"), "answer.summary: Input should be a valid dictionary"),
        (lambda d: d.update(summary={"scope": "shared"}), "answer.summary.content: Field required"),
    ],
)
def test_a_missing_or_mistyped_summary_or_list_is_reported_and_the_items_are_kept(mutate, reason):
    extraction = parse(answer_with(mutate))
    assert any(f"{r.path}: {r.rule}".startswith(reason) for r in extraction.rejected)
    assert len(extraction.items) >= 2 and extraction.note == ""
    assert "4711" not in json.dumps([r.as_dict() for r in extraction.rejected])


def test_more_items_than_the_limit_break_the_answer():
    with pytest.raises(MalformedAnswer, match=f"at most {MAX_ITEMS} items"):
        parse(answer_with(lambda d: d.update(facts=d["facts"] * (MAX_ITEMS // 2 + 1))))


def three_facts() -> str:
    return extraction_answer(
        facts=["Der Code für das Gartentor ist 4711.", "Tom hat am 2. Mai Geburtstag.", "Der Müll geht am Dienstag."],
        preferences=["Anna trinkt gern Tee."],
        summary="Anna erzählte vom Haus.",
    )


def test_an_answer_cut_off_by_the_token_limit_keeps_every_complete_item():
    text = three_facts()
    cut = text[: text.index("Der Müll") + 5]  # inside the third fact
    extraction = parse(cut)
    assert [i.content for i in extraction.items] == [
        "Der Code für das Gartentor ist 4711.",
        "Tom hat am 2. Mai Geburtstag.",
    ]
    assert extraction.note == "cut off: 2 items kept" and extraction.summary is None
    assert extraction.rejected == []  # what the cut never reached is not a rejection


@pytest.mark.parametrize("after", [", ", "", "  "])
def test_a_cut_right_after_an_item_keeps_it(after):
    text = three_facts()
    end = text.index("}", text.index("Der Müll")) + 1
    extraction = parse(text[:end] + after)
    assert len(extraction.items) == 3 and extraction.note == "cut off: 3 items kept"


def test_a_cut_in_an_open_item_drops_it_even_when_its_keys_would_pass():
    text = three_facts()
    end = text.index("}", text.index("Der Müll"))
    extraction = parse(text[:end])  # everything of the third fact but its closing brace
    assert len(extraction.items) == 2


def test_an_answer_broken_part_way_keeps_what_precedes_the_break():
    text = three_facts()
    broken = text.replace('"confidence": 0.9, "importance"', '"confidence": 0.9 "importance"', 3)
    broken = broken.replace('"confidence": 0.9 "importance"', '"confidence": 0.9, "importance"', 1)  # the 2nd breaks
    extraction = parse(broken)
    assert [i.content for i in extraction.items] == ["Der Code für das Gartentor ist 4711."]
    assert extraction.note == "malformed: 1 items kept"


def test_trailing_words_after_a_whole_answer_are_ignored():
    extraction = parse(three_facts() + "\nI hope this helps!")
    assert len(extraction.items) == 4 and extraction.note == "" and extraction.summary is not None


def test_a_cut_answer_with_no_complete_item_is_malformed_with_a_text_free_reason():
    text = three_facts()
    with pytest.raises(MalformedAnswer) as error:
        parse(text[: text.index("4711")])
    assert str(error.value) == "no readable item in the answer: cut off: 0 items kept"


def test_a_clean_answer_with_nothing_to_remember_is_no_failure():
    extraction = parse(extraction_answer())
    assert (extraction.items, extraction.summary, extraction.rejected, extraction.note) == ([], None, [], "")


def test_every_item_rejected_means_nothing_readable():
    data = json.loads(extraction_answer(facts=["Der Code ist 4711."]))
    data["facts"][0]["confidence"] = 7
    with pytest.raises(MalformedAnswer, match=r"^no readable item in the answer: answer.facts\[0\].confidence"):
        parse(data)


def test_the_token_bound_covers_the_longest_answer_the_schema_allows():
    bound = answer_max_tokens(EXTRACTION_SCHEMA)
    longest = {
        "facts": [{"content": "x" * MAX_ITEM_CHARS, "turns": [10000] * 20, "inferred": False, "about": "a" * 200}]
        * MAX_ITEMS,
        "summary": {"content": "y" * 2000},
    }
    longest["preferences"] = longest["facts"]
    assert len(json.dumps(longest)) / 3 <= bound < len(json.dumps(longest)) / 2


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
    with pytest.raises(
        MalformedAnswer,
        match=r"^no readable item in the answer: answer.facts: Input should be a valid list \(\+2 more\)$",
    ):
        parse(data)
