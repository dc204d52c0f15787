"""bench/answer.py: the gold evidence turns reach the model in the form recall's block shows memories."""

import pytest

from bench.answer import ARMS, Figures, evidence_block
from bench.locomo import questions_of, store_conversations
from justai_core.ai_router import Answer
from memories.caller import Caller
from memories.embedders import get_embedder
from memories.services.recall import memory_recall

SAMPLE = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Caroline",
        "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a support group yesterday."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "That sounds lovely."},
        ],
        "session_2_date_time": "10:37 am on 27 June, 2023",
        "session_2": [
            {"speaker": "Melanie", "dia_id": "D2:1", "text": "We painted a lake sunrise last week."},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "That sounds lovely."},
        ],
    },
    "qa": [
        # Evidence ids as LoCoMo writes them: out of order, with stray spaces, a malformed one.
        {"question": "What did they do?", "answer": "x", "evidence": ["D2:1 ", "D1:1", "D9:9"], "category": 1},
    ],
}


@pytest.mark.django_db
def test_the_evidence_block_lists_the_evidence_turns_as_recall_lists_them():
    ((room, memory_of, _turns),) = store_conversations([SAMPLE], embedder=get_embedder())
    (qa,) = questions_of(SAMPLE)

    block, unresolved = evidence_block(evidence=qa["evidence"], memory_of=memory_of)

    lines = block.splitlines()
    assert lines[1:3] == [
        "- [from conversation, 2023-05-08] Caroline: I went to a support group yesterday.",
        "- [from conversation, 2023-06-27] Melanie: We painted a lake sunrise last week.",
    ]
    assert len(lines) == 4  # the header, the two turns in the conversation's order, the language rule
    assert unresolved == 1  # "D9:9" names no turn
    for line in lines[1:3]:  # recall's block shows the same turn in the same line
        recalled = memory_recall(
            query=line.split("] ", 1)[1],
            caller=Caller(room=room, speaker=None, model_location="local", language="en"),
        )
        assert line in recalled.prompt.splitlines()
        assert recalled.prompt.splitlines()[0] == lines[0] and recalled.prompt.splitlines()[-1] == lines[-1]


@pytest.mark.django_db
def test_a_turn_merged_into_an_earlier_one_is_given_once():
    ((_room, memory_of, _turns),) = store_conversations([SAMPLE], embedder=get_embedder())

    block, unresolved = evidence_block(evidence=["D1:2", "D2:2"], memory_of=memory_of)

    assert block.splitlines()[1:-1] == ["- [from conversation, 2023-05-08] Melanie: That sounds lovely."]
    assert unresolved == 0


def test_the_share_is_the_recall_blocks_f1_over_the_evidence_turns_f1(capsys):
    figures = Figures()
    for arm, f1s in zip(ARMS, ([0.2, 0.4], [0.0, 0.1], [0.5, 0.7]), strict=True):
        for category, f1 in zip((2, 4), f1s, strict=True):
            figures.add(arm, category, f1, Answer(tokens=4, seconds=2.0, first_token_seconds=1.0))
    figures.questions = 2

    figures.print("all")

    out = capsys.readouterr().out
    share = next(line for line in out.splitlines() if line.strip().startswith("share")).split()
    assert share[1:5] == ["0.50", "-", "0.40", "0.57"]  # all: 0.3 / 0.6; multi-hop: no question; temporal; single-hop
    assert "seconds per answer p50 2.00, p95 2.00; tokens/s 4.0" in out
