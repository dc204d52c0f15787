"""Recall's keyword path: Okapi BM25 scores computed by PostgreSQL from the text column's own statistics."""

import re
import time
import unicodedata
from typing import NamedTuple

from django.db import connection

from memories.embedders import vector_literal
from memories.languages import MAIN_LANGUAGES, household_languages, text_search_config
from memories.selectors.nearest import table_where

# Okapi BM25 (Robertson et al.), the usual constants. A memory is a sentence or two, so a word's
# count in it is taken as 1 (present or not): what matters is how rare the word is (IDF) and how
# long the memory is (length normalisation), both of which ts_rank ignores.
BM25_K1 = 1.2
BM25_B = 0.3
MAX_QUERY_WORDS = 32
# Lexemes that PostgreSQL's statistics put in more than this many memories do not select rows, they
# only score them: a common word ("super", "anna") would otherwise make the keyword path score
# thousands of memories before every answer. Each selecting lexeme brings at most this many rows.
FREQUENT_LEXEME_ROWS = 250
# Function words of these languages (PostgreSQL's stop word lists) never match, neither as typed
# nor stemmed, whatever the query's language is taken to be: a German question from a speaker whose
# language is Italian would otherwise match "ist" and "der" as typed in every German memory. The
# household's own languages (its people's) are added to these.
STOP_WORD_LANGUAGES = MAIN_LANGUAGES

# Per lexeme of the column, the number of memories holding it, from the statistics ANALYZE keeps
# (the most common 10,000 lexemes: migration 0005 sets the column's target to 1,000), and the
# average memory length (distinct lexemes) of the newest 1,000 memories. A lexeme missing from the
# statistics is rarer than any tracked one: it counts as in half as many memories as the rarest.
# reltuples is -1 while the table's size is unknown (PostgreSQL 14+: never vacuumed or analysed since it was
# emptied), even where pg_stats still holds lexeme frequencies: those rows would count negative memories
# and BM25's idf take the logarithm of a negative number, so there are no statistics then.
STATISTICS_SQL = """
SELECT e.lexeme, e.frequency * c.reltuples FROM pg_stats s
CROSS JOIN LATERAL unnest(s.most_common_elems::text::text[], s.most_common_elem_freqs) AS e(lexeme, frequency)
JOIN pg_class c ON c.oid = 'memories_memory'::regclass
WHERE s.schemaname = current_schema() AND s.tablename = 'memories_memory' AND s.attname = 'search_vector'
AND e.lexeme IS NOT NULL AND c.reltuples > 0
"""
COLLECTION_SQL = """
SELECT (SELECT greatest(reltuples, 0) FROM pg_class WHERE oid = 'memories_memory'::regclass),
       avg(length(search_vector)), count(*)
FROM (SELECT search_vector FROM memories_memory ORDER BY id DESC LIMIT 1000) newest
"""
STATISTICS_TTL = 600.0  # seconds; the statistics change only when (auto)ANALYZE runs
# Before the first ANALYZE (a new household, a restored dump) there are no lexeme statistics and
# every word would weigh the same: ask again soon, so autovacuum's first ANALYZE counts within a minute.
NO_STATISTICS_TTL = 30.0


class Statistics(NamedTuple):
    expires: float
    rows: dict[str, float]  # lexeme -> memories holding it
    by_folded: dict[str, tuple[str, ...]]  # folded lexeme -> lexemes (see lexeme_rows_of)
    memories: float
    average_length: float
    rare_rows: float
    stop_configs: tuple[str, ...]
    household: tuple[str, ...] = ()  # the people's preferred languages


_statistics: dict[str, Statistics] = {}

_QUOTED = r"'''' || replace(replace(lexeme, '\', '\\'), '''', '''''') || ''''"
# The question's words ('simple': lower-cased, as typed) without the function words of any
# household language; per word its lexemes: as typed (names and numbers such as 4711 match in
# any language) and stemmed in each of the query's languages; per word one IDF, from the commonest
# of its lexemes. A memory's score is the sum of the IDFs of the words it holds, normalised by its
# length (BM25). Lexemes in more than FREQUENT_LEXEME_ROWS memories only score; the others select,
# through the GIN index, and the visibility filter is checked on each match in the same pass
# ("IS TRUE" keeps it away from the visibility index: ANDing the match bitmap with a bitmap of
# every shared memory costs more than the rest of the query). The similarity to the question is
# computed for the best ``limit`` only. Each match's tsvector (often TOASTed, compressed) is
# decompressed once into a copy the terms are checked against ("|| ''"; OFFSET 0 keeps PostgreSQL
# from folding it back): checked in place, every term fetched and decompressed it again.
KEYWORD_SQL = f"""
WITH words AS MATERIALIZED (
    SELECT w.word FROM unnest(tsvector_to_array(to_tsvector('simple', %s))) AS w(word)
    WHERE NOT EXISTS (SELECT 1 FROM unnest(%s::regconfig[]) c WHERE to_tsvector(c, w.word) = ''::tsvector)
    ORDER BY w.word LIMIT %s
), rated AS MATERIALIZED (
    SELECT w.word, l.lexeme, coalesce(s.rows, %s) AS rows
    FROM words w CROSS JOIN LATERAL (
        SELECT unnest(tsvector_to_array(to_tsvector(c, w.word))) FROM unnest(%s::regconfig[]) c
        UNION SELECT w.word
    ) AS l(lexeme)
    LEFT JOIN unnest(%s::text[], %s::float8[]) AS s(lexeme, rows) USING (lexeme)
), terms AS MATERIALIZED (
    SELECT string_agg({_QUOTED}, ' | ')::tsquery AS query, ln(1 + (%s - max(rows) + 0.5) / (max(rows) + 0.5)) AS idf
    FROM rated GROUP BY word
), hits AS MATERIALIZED (
    SELECT id, language,
        (SELECT sum(t.idf) FROM terms t WHERE l.v @@ t.query)
        / (1 + %s * (1 - %s + %s * length(l.v) / %s)) AS score
    FROM memories_memory CROSS JOIN LATERAL (SELECT search_vector || ''::tsvector AS v OFFSET 0) AS l
    WHERE search_vector @@ (SELECT string_agg({_QUOTED}, ' | ')::tsquery FROM rated WHERE rows <= %s)
    AND ({{where}}) IS TRUE
    ORDER BY score DESC, id DESC LIMIT %s
)
SELECT h.id, h.language, h.score, 1 - (m.embedding <=> %s::vector)
FROM hits h JOIN memories_memory m ON m.id = h.id ORDER BY h.score DESC, h.id DESC
"""
WORD = re.compile(r"\w+")


class KeywordHit(NamedTuple):
    id: int
    score: float  # BM25 (with count 1 per word); comparable within one question only
    in_query_language: bool  # the memory is in one of the query's languages (else matched only as typed)
    similarity: float | None  # cosine similarity to the question, when its embedding was given


def keyword_statistics() -> Statistics:
    """Lexeme frequencies, collection size and average length (cached per process for STATISTICS_TTL)."""
    key = connection.settings_dict["NAME"]
    cached = _statistics.get(key)
    if cached is not None and cached.expires > time.monotonic():
        return cached
    with connection.cursor() as cursor:
        cursor.execute(STATISTICS_SQL)
        rows = {lexeme: float(n) for lexeme, n in cursor.fetchall()}
        cursor.execute(COLLECTION_SQL)
        reltuples, average, sampled = cursor.fetchone()
    by_folded: dict[str, tuple[str, ...]] = {}
    for lexeme in sorted(rows):
        by_folded[_fold(lexeme)] = (*by_folded.get(_fold(lexeme), ()), lexeme)
    household = tuple(sorted(household_languages()))
    configs = (text_search_config(code) for code in (*STOP_WORD_LANGUAGES, *household))
    statistics = Statistics(
        expires=time.monotonic() + (STATISTICS_TTL if rows else NO_STATISTICS_TTL),
        rows=rows,
        by_folded=by_folded,
        memories=max(float(reltuples or 0), float(sampled or 0), 1.0),
        average_length=float(average or 1.0),
        rare_rows=max(min(rows.values(), default=2.0) / 2, 1.0),
        stop_configs=tuple(c for c in dict.fromkeys(configs) if c != "simple"),
        household=household,
    )
    _statistics[key] = statistics
    return statistics


def forget_statistics() -> None:
    """Drop the cached statistics (after an ANALYZE that should count at once: benchmarks, tests)."""
    _statistics.clear()


def _fold(text: str) -> str:
    """Lower case without accents, umlauts or ß (as the stemmers fold them)."""
    decomposed = unicodedata.normalize("NFKD", text.lower().replace("ß", "ss"))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def lexeme_rows_of(query: str) -> tuple[list[str], list[float]]:
    """The tracked lexemes the query's words can stem to, with the number of memories holding each.

    Sending all of them (thousands at 100k memories) with every question cost about 1 ms of quoting
    and parsing. A stem is the word or a beginning of it once both are folded (the English stemmer's
    y -> i aside, covered too); a lexeme this misses counts as rare.
    """
    statistics = keyword_statistics()
    found: set[str] = set()
    for word in {_fold(w) for w in WORD.findall(query)}:
        for variant in {word, word[:-1] + "i"} if word.endswith("y") else {word}:
            for end in range(1, len(variant) + 1):
                found.update(statistics.by_folded.get(variant[:end], ()))
    lexemes = sorted(found)
    return lexemes, [statistics.rows[lexeme] for lexeme in lexemes]


def keyword_hits(*, candidates, query: str, languages: list[str], limit: int, embedding=None) -> list[KeywordHit]:
    """The ``limit`` candidates with the best BM25 scores for the question's words, best first.

    Any word, not all: a question rarely repeats every word of the memory that answers it. A rare
    word (a name, a place) weighs more than a common one, and a long memory needs more of them.
    With ``embedding`` each hit carries its similarity to the question.
    """
    where = table_where(candidates)
    if where is None:
        return []
    statistics = keyword_statistics()
    configs = list(dict.fromkeys(text_search_config(language) for language in languages)) or ["simple"]
    stop_configs = list(dict.fromkeys([*statistics.stop_configs, *(c for c in configs if c != "simple")]))
    lexemes, rows = lexeme_rows_of(query)
    params = [
        *(query, stop_configs, MAX_QUERY_WORDS, statistics.rare_rows, configs, lexemes, rows, statistics.memories),
        *(BM25_K1, BM25_B, BM25_B, statistics.average_length, FREQUENT_LEXEME_ROWS),
        *where[1],
        limit,
        vector_literal(embedding) if embedding is not None else None,
    ]
    with connection.cursor() as cursor:
        cursor.execute(KEYWORD_SQL.format(where=where[0]), params)
        return [
            KeywordHit(
                id=pk,
                score=float(score),
                in_query_language=language in languages,
                similarity=None if similarity is None else float(similarity),
            )
            for pk, language, score, similarity in cursor.fetchall()
        ]
