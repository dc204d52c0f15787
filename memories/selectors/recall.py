"""Recall: what the assistant is told before every answer (hybrid search, the prompt block, working memory)."""

import logging
import re
import time
import unicodedata
from dataclasses import dataclass, field
from datetime import date

from django.db import connection
from django.utils import timezone

from justai_memory.errors import ApplicationError
from memories.embedders import vector_literal
from memories.languages import language_name, languages_for_query, text_search_config
from memories.limits import MAX_TEXT_CHARS, RECALL_LIMIT_MAX
from memories.models import PROVENANCE_LABELS, Memory
from memories.selectors.nearest import nearest_memories, table_where
from memories.selectors.privacy import WITHHELD_FOR_CLOUD, memories_allowed_for
from memories.services.embeddings import active_embedder
from transcripts.selectors import working_memory

logger = logging.getLogger(__name__)

QUERY_EMPTY = "'query' must not be empty."
QUERY_TOO_LONG = f"'query' is longer than {MAX_TEXT_CHARS} characters."
LIMIT_INVALID = f"'limit' must be an integer from 1 to {RECALL_LIMIT_MAX}."
CONVERSATION_OTHER_ROOM = "This conversation belongs to another room."

ABOUT_SPEAKER_MAX = 3  # memories about a known speaker, added beyond ``limit``
ABOUT_SPEAKER_WINDOW = 100
RRF_K = 60  # reciprocal rank fusion constant (Cormack et al. 2009)


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


@dataclass
class RecallResult:
    memories: list[RecalledMemory]
    prompt: str
    withheld: bool = False
    withheld_reason: str = ""
    working_memory: list[dict] = field(default_factory=list)  # {role, speaker_id, text, at}


def recall_candidates(*, speaker, room):
    """The memories recall may return: visible to this speaker in this room, and active."""
    return Memory.objects.visible_to(speaker=speaker, room=room).active()


def vector_hits(*, candidates, embedding, limit: int, min_similarity: float) -> list[tuple[int, float]]:
    """(id, similarity) of the ``limit`` nearest candidates with similarity >= ``min_similarity``, nearest first."""
    return nearest_memories(candidates=candidates, embedding=embedding, limit=limit, min_similarity=min_similarity)


# The query's lexemes as a tsquery "any of them", built by PostgreSQL inside the statement: the words
# stemmed with each language configuration, plus the words as typed ('simple': names and numbers
# such as 4711 match across languages) unless they are stop words of the query's language, leaving
# out ``exclude``. NULL, which matches nothing, when no lexeme is left.
ANY_LEXEME_SQL = r"""(SELECT string_agg('''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || '''', ' | ')::tsquery
    FROM (
        SELECT lexeme FROM (
            SELECT unnest(tsvector_to_array(to_tsvector(config, %s))) AS lexeme FROM unnest(%s::regconfig[]) config
            UNION
            SELECT word FROM unnest(tsvector_to_array(to_tsvector('simple', %s))) word
            WHERE NOT EXISTS (
                SELECT 1 FROM unnest(%s::regconfig[]) config WHERE to_tsvector(config, word) = ''::tsvector
            )
        ) words ORDER BY lexeme LIMIT %s
    ) lexemes WHERE lexeme <> ALL(%s::text[]))"""
MAX_QUERY_LEXEMES = 64
# Lexemes that PostgreSQL's statistics (ANALYZE keeps the most common ones per tsvector column, up to
# 10,000 of them: see migration 0005) put in more than this many memories do not select rows, they
# only rank them: a common word ("super", "anna") would otherwise make the keyword path rank
# thousands of memories before every answer. Each selecting lexeme brings at most this many rows.
FREQUENT_LEXEME_ROWS = 250
FREQUENT_LEXEMES_SQL = """
SELECT e.lexeme FROM pg_stats s
CROSS JOIN LATERAL unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, frequency)
JOIN pg_class c ON c.oid = 'memories_memory'::regclass
WHERE s.schemaname = current_schema() AND s.tablename = 'memories_memory' AND s.attname = 'search_vector'
AND e.lexeme IS NOT NULL AND e.frequency * c.reltuples > %(rows)s
"""
FREQUENT_LEXEMES_TTL = 600.0  # seconds; the statistics change only when (auto)ANALYZE runs
_frequent_lexemes: dict[str, tuple[float, frozenset[str], dict[str, tuple[str, ...]]]] = {}
WORD = re.compile(r"\w+")
# The GIN index finds the matches and the visibility filter is checked on each of them, in the same
# pass over the heap. "IS TRUE" keeps the filter away from the visibility index: left to itself,
# PostgreSQL ANDs the match bitmap with a bitmap of every shared memory, which costs more than the
# whole rest of the query. Raw SQL: the tsquery is built inside the statement (ANY_LEXEME_SQL).
KEYWORD_SQL = """
SELECT id, language FROM memories_memory
WHERE search_vector @@ {match} AND ({where}) IS TRUE
ORDER BY ts_rank(search_vector, {rank}) DESC, id DESC
LIMIT %s
"""


def frequent_lexemes() -> frozenset[str]:
    """Lexemes in more than FREQUENT_LEXEME_ROWS memories by the planner's statistics (cached per process)."""
    return _frequent()[0]


def _frequent() -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
    """The frequent lexemes, and the same by their folded form (see ``frequent_lexemes_of``)."""
    key = connection.settings_dict["NAME"]
    cached = _frequent_lexemes.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1], cached[2]
    with connection.cursor() as cursor:
        cursor.execute(FREQUENT_LEXEMES_SQL, {"rows": FREQUENT_LEXEME_ROWS})
        lexemes = frozenset(row[0] for row in cursor.fetchall())
    by_folded: dict[str, tuple[str, ...]] = {}
    for lexeme in sorted(lexemes):
        by_folded[_fold(lexeme)] = (*by_folded.get(_fold(lexeme), ()), lexeme)
    _frequent_lexemes[key] = (time.monotonic() + FREQUENT_LEXEMES_TTL, lexemes, by_folded)
    return lexemes, by_folded


def _fold(text: str) -> str:
    """Lower case without accents, umlauts or ß (as the stemmers fold them)."""
    decomposed = unicodedata.normalize("NFKD", text.lower().replace("ß", "ss"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def frequent_lexemes_of(query: str) -> str:
    """The frequent lexemes that the query's words can stem to, as a PostgreSQL array literal.

    Sending all of them (thousands at 100k memories, ~30 kB) with every question cost about 1 ms of
    quoting and parsing. A stem is the word or a beginning of it once both are folded (the English
    stemmer's y -> i aside, covered too); a frequent lexeme this misses just selects like any other.
    """
    by_folded = _frequent()[1]
    found: set[str] = set()
    for word in {_fold(w) for w in WORD.findall(query)}:
        for variant in {word, word[:-1] + "i"} if word.endswith("y") else {word}:
            for end in range(1, len(variant) + 1):
                found.update(by_folded.get(variant[:end], ()))
    quoted = ('"' + lexeme.replace("\\", "\\\\").replace('"', '\\"') + '"' for lexeme in sorted(found))
    return "{" + ",".join(quoted) + "}"


def _any_lexeme(*, query: str, configs: list[str], exclude: str = "{}") -> tuple[str, list]:
    return ANY_LEXEME_SQL, [query, configs, query, configs, MAX_QUERY_LEXEMES, exclude]


def keyword_hits(*, candidates, query: str, languages: list[str], limit: int) -> list[tuple[int, bool]]:
    """(id, in the query's language) of the best full-text matches among the candidates, best first.

    Any word, not all: a question rarely repeats every word of the memory that answers it, and
    ``ts_rank`` puts the memories that share the most words first. Frequent lexemes rank but do not
    select (see FREQUENT_LEXEME_ROWS).
    """
    where = table_where(candidates)
    if where is None:
        return []
    configs = list(dict.fromkeys(text_search_config(language) for language in languages)) or ["simple"]
    match_sql, match_params = _any_lexeme(query=query, configs=configs, exclude=frequent_lexemes_of(query))
    rank_sql, rank_params = _any_lexeme(query=query, configs=configs)
    sql = KEYWORD_SQL.format(match=match_sql, where=where[0], rank=rank_sql)
    with connection.cursor() as cursor:
        cursor.execute(sql, [*match_params, *where[1], *rank_params, limit])
        return [(pk, language in languages) for pk, language in cursor.fetchall()]


def fuse(vector: list[int], keyword: list[tuple[int, bool]], *, limit: int) -> list[int]:
    """Reciprocal rank fusion of the vector hits (ids, nearest first) and the keyword hits, cut to ``limit``.

    Neither path loses its best hits to the cut: the top ceil(limit / 2) vector hits and the top
    floor(limit / 2) keyword hits always stay in. A keyword hit in the query's language (matched on
    stems) counts like a vector hit, so what both find rises. A keyword hit in another language can
    only have matched words as typed (names, numbers): it supplements, after the ranked hits, but
    does not reorder them (bench/retrieval.py: letting it vote costs cross-lingual hit@1 and hit@5).
    """
    scores: dict[int, float] = {}
    for rank, pk in enumerate(vector, start=1):
        scores[pk] = 1 / (RRF_K + rank)
    for rank, (pk, in_query_language) in enumerate(keyword, start=1):
        scores[pk] = scores.get(pk, 0.0) + (1 / (RRF_K + rank) if in_query_language else 0.0)
    # Ties go to the vector hit, then to the better keyword rank: deterministic.
    position: dict[int, int] = {}
    for i, pk in enumerate([*vector, *(pk for pk, _ in keyword)]):
        position.setdefault(pk, i)
    order = sorted(scores, key=lambda pk: (-scores[pk], position[pk]))
    kept = set(vector[: (limit + 1) // 2]) | {pk for pk, _ in keyword[: limit // 2]}
    kept |= set([pk for pk in order if pk not in kept][: limit - len(kept)])
    return [pk for pk in order if pk in kept]


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


def memory_recall(
    *, query: str, speaker, room, conversation=None, limit: int = 10, record_access: bool = True
) -> RecallResult:
    """Memories for the assistant's next answer, the prompt block and the working memory.

    Side effect: ``access_count``/``last_accessed_at`` of the returned memories are bumped (by the
    statement that loads them) unless ``record_access`` is False (the admin's preview).
    """
    query = (query or "").strip()
    if not query:
        raise ApplicationError(QUERY_EMPTY, field="query")
    if len(query) > MAX_TEXT_CHARS:
        raise ApplicationError(QUERY_TOO_LONG, field="query")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RECALL_LIMIT_MAX:
        raise ApplicationError(LIMIT_INVALID, field="limit")
    if conversation is not None and room is not None and conversation.room_id != room.pk:
        raise ApplicationError(CONVERSATION_OTHER_ROOM, field="conversation_id")

    turns = working_memory(conversation=conversation) if conversation is not None else []
    language = conversation.language if conversation is not None else None
    if conversation is not None and not memories_allowed_for(model_location=conversation.model_location):
        return RecallResult(
            memories=[],
            prompt=withheld_prompt(language=language),
            withheld=True,
            withheld_reason=WITHHELD_FOR_CLOUD,
            working_memory=turns,
        )

    embedder = active_embedder()
    embedding = embedder.embed_query(query)
    candidates = recall_candidates(speaker=speaker, room=room)
    by_vector = vector_hits(
        candidates=candidates, embedding=embedding, limit=limit, min_similarity=embedder.thresholds.recall_min
    )
    by_keyword = keyword_hits(
        candidates=candidates,
        query=query,
        languages=languages_for_query(
            conversation_language=conversation.language if conversation is not None else None,
            speaker_language=speaker.preferred_language if speaker is not None else None,
        ),
        limit=limit,
    )
    ids = fuse([pk for pk, _ in by_vector], by_keyword, limit=limit)
    if speaker is not None:
        ids += [
            pk for pk, _ in about_speaker_hits(candidates=candidates, speaker=speaker, embedding=embedding, exclude=ids)
        ]
    memories = _load(ids=ids, embedding=embedding, record_access=record_access) if ids else []
    return RecallResult(
        memories=memories, prompt=prompt_block(memories=memories, language=language), working_memory=turns
    )


# The recalled memories with their similarity to the query, in one statement with the access bump
# when there is one (a data-modifying WITH). The bump goes to the narrow MemoryAccess table, never to
# the memory's own row (see MemoryAccess). Outside a transaction it commits asynchronously
# (set_config(..., true) lasts until the end of the statement's own transaction): a count lost in a
# crash does no harm, and recall does not wait for the disk before every answer. Inside a caller's
# transaction it is a plain write, so the caller's commit stays synchronous. Only memories that still
# exist are bumped (one forgotten since the search is skipped).
LOAD_COLUMNS = "id, content, language, kind, provenance, scope, valid_at, 1 - (embedding <=> %s::vector)"
LOAD_SQL = f"SELECT {LOAD_COLUMNS} FROM memories_memory WHERE id = ANY(%s)"
LOAD_AND_RECORD_ACCESS_SQL = (
    "WITH bump AS (INSERT INTO memories_memoryaccess AS a (memory_id, count, last_accessed_at) "
    "SELECT id, 1, %s FROM memories_memory WHERE id = ANY(%s){asynchronous} "
    "ON CONFLICT (memory_id) DO UPDATE SET count = a.count + 1, last_accessed_at = EXCLUDED.last_accessed_at) "
    + LOAD_SQL
)
ASYNCHRONOUS_COMMIT = " AND set_config('synchronous_commit', 'off', true) IS NOT NULL"


def _load(*, ids: list[int], embedding, record_access: bool) -> list[RecalledMemory]:
    """The recalled memories in ``ids`` order, each with its similarity to the query.

    With ``record_access`` their access_count and last_accessed_at are bumped by the same statement.
    """
    vector = vector_literal(embedding)
    if record_access:
        asynchronous = "" if connection.in_atomic_block else ASYNCHRONOUS_COMMIT
        sql = LOAD_AND_RECORD_ACCESS_SQL.format(asynchronous=asynchronous)
        params = [timezone.now(), ids, vector, ids]
    else:
        sql, params = LOAD_SQL, [vector, ids]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        by_id = {row[0]: row for row in cursor.fetchall()}
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
        )
        for pk, content, language, kind, provenance, scope, valid_at, similarity in (
            by_id[pk]
            for pk in ids
            if pk in by_id  # forgotten between the search and the load
        )
    ]
