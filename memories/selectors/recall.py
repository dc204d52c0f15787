"""What recall reads besides the ranking (memories/selectors/ranking.py): the candidates, the memories about a
known speaker, the recalled memories and the prompt block. Reads only; ``memory_recall``
(memories/services/recall.py) runs them and counts the access."""

from dataclasses import dataclass, field
from datetime import date

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from memories.caller import Caller
from memories.embedders import vector_literal
from memories.languages import language_name
from memories.models import PROVENANCE_LABELS, Memory
from memories.selectors.fusion import Found
from memories.selectors.nearest import table_where
from memories.selectors.privacy import memories_allowed_or_refuse

CONVERSATION_OTHER_ROOM = "This conversation belongs to another room."

ABOUT_SPEAKER_MAX = 3  # memories about a known speaker, added beyond ``limit``
ABOUT_SPEAKER_WINDOW = 100


@dataclass(frozen=True)
class RecalledMemory:
    id: int
    content: str
    language: str
    kind: str
    label: str
    provenance: str
    scope: str
    date: date
    score: float  # cosine similarity to the query
    # Why it came back: per path that found it (vector, keyword, keyword_other_language, date,
    # about_speaker) its rank there and its score. Never part of the prompt.
    found_by: dict[str, Found] = field(default_factory=dict)


@dataclass
class RecallResult:
    memories: list[RecalledMemory]
    prompt: str
    withheld: bool = False
    withheld_reason: str = ""


def recall_candidates(*, speaker, room):
    """The memories recall may return: visible to this speaker in this room, and active."""
    return Memory.objects.visible_to(speaker=speaker, room=room).active()


def memories_readable(*, caller: Caller) -> QuerySet[Memory]:
    """What ``caller`` may read where no withheld answer fits (a memory's detail, the procedures): recall's
    candidates for its speaker and room; a 403 naming ``model_location`` when the cloud rule withholds
    memories from its model."""
    memories_allowed_or_refuse(model_location=caller.model_location)
    return recall_candidates(speaker=caller.speaker, room=caller.room)


# The window is read in the order of the index on (about, id) and stops after ABOUT_SPEAKER_WINDOW
# rows; the visibility filter and the distance apply to those rows only. Raw SQL because the ORM
# cannot select from a subquery, and an "id IN (window)" join reads every row twice.
ABOUT_SPEAKER_SQL = """
SELECT id, embedding <=> %s::vector AS distance
FROM (
    SELECT * FROM memories_memory
    WHERE about_id = %s AND id <> ALL(%s)
    ORDER BY id DESC
    LIMIT %s
) AS memories_memory
WHERE ({where}) IS TRUE
ORDER BY distance, id
LIMIT %s
"""


def about_speaker_hits(*, candidates, speaker, embedding, exclude: list[int]) -> list[tuple[int, float]]:
    """(id, similarity) of the visible memories about a known speaker nearest to the query, leaving out ``exclude``.

    Bounded work however much the household knows about a person: ranked exactly among the
    ABOUT_SPEAKER_WINDOW memories about them stored last, of which the visible active ones count.
    (Older ones still come through the vector and keyword paths when the question is about them.)
    """
    where = table_where(candidates)
    if where is None:
        return []
    sql = ABOUT_SPEAKER_SQL.format(where=where[0])
    params = [vector_literal(embedding), speaker.pk, exclude, ABOUT_SPEAKER_WINDOW, *where[1], ABOUT_SPEAKER_MAX]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [(pk, 1 - distance) for pk, distance in cursor.fetchall()]


def _answer_instruction(language: str | None) -> str:
    if language:
        return f"Answer in the language of the current conversation: {language_name(language)} ({language})."
    return "Answer in the language of the current conversation."


def prompt_block(*, memories: list[RecalledMemory], language: str | None) -> str:
    """The block for the model: one line per memory with its origin label and date, then the language rule."""
    if not memories:
        return f"No long-term memories match this request.\n{_answer_instruction(language)}"
    lines = [
        "Long-term memories (the household's, in the language they were learned in). "
        "Each line: [origin, date] memory. Origins: confirmed = said or confirmed explicitly; "
        "observed = seen by sensors; from conversation = taken from an earlier conversation; "
        "GUESS = a model's guess, may be wrong.",
    ]
    for memory in memories:
        # One memory per line, whatever its text holds.
        content = " ".join(memory.content.split())
        lines.append(f"- [{memory.label}, {memory.date.isoformat()}] {content}")
    lines.append(_answer_instruction(language))
    return "\n".join(lines)


def withheld_prompt(*, language: str | None) -> str:
    return (
        "Long-term memories were withheld: this conversation runs on a cloud model and the household "
        "does not allow personal memories to reach cloud models. Do not claim to remember anything about "
        "the household; if asked, say that memories are not shared with cloud models.\n"
        f"{_answer_instruction(language)}"
    )


# The recalled memories with their similarity to the query. Recall's access bump runs in the same
# statement (memories.services.access.recall_record takes this SELECT).
LOAD_COLUMNS = "id, content, language, kind, provenance, scope, valid_at, 1 - (embedding <=> %s::vector)"
LOAD_SQL = f"SELECT {LOAD_COLUMNS} FROM memories_memory WHERE id = ANY(%s)"


def recalled_load_query(*, ids: list[int], embedding) -> tuple[str, list]:
    """The SELECT of the memories ``ids`` with their similarity to the query, and its parameters (``recalled_of``
    reads its rows)."""
    return LOAD_SQL, [vector_literal(embedding), ids]


def recalled_load(*, ids: list[int], embedding) -> list[tuple]:
    """The rows of ``recalled_load_query`` (reads only; recall with its access bump runs the SELECT in the
    access service's statement)."""
    if not ids:
        return []
    sql, params = recalled_load_query(ids=ids, embedding=embedding)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def recalled_of(*, rows: list[tuple], ids: list[int], found_by: dict) -> list[RecalledMemory]:
    """The recalled memories in ``ids`` order from the rows of ``recalled_load_query``, each with why it came back;
    an id without a row (forgotten between the search and the load) is left out."""
    by_id = {row[0]: row for row in rows}
    return [
        RecalledMemory(
            id=pk,
            content=content,
            language=language,
            kind=kind,
            label=PROVENANCE_LABELS[provenance],
            provenance=provenance,
            scope=scope,
            date=timezone.localdate(valid_at),
            score=round(float(similarity), 4),
            found_by={
                path: Found(rank=found.rank, score=round(found.score, 4)) for path, found in found_by[pk].items()
            },
        )
        for pk, content, language, kind, provenance, scope, valid_at, similarity in (
            by_id[pk] for pk in ids if pk in by_id
        )
    ]
