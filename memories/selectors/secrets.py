"""Which memories hold a secret: a value (a PIN, a code, a password) or a topic such as health, money troubles or
a relationship in trouble (reads only).

The topic gate (memories/selectors/topic.py) keeps a secret about a person the question names out unless it is
among the closest answers; other facts about them need only be on the question's topic. A memory holds a secret
when it carries a number or code (``digests.distinctive_tokens``: three digits or more, not a bare year; letters
and digits together) or a whole value (``digests.whole_values``: "Sonnenblume 8812"), or when, with the
household's names masked, the secret topic closest to it in the judge's space (``SECRET_TOPICS``) is closer than
any everyday topic (``EVERYDAY_TOPICS``) and at least ``TOPIC_LEVEL`` close. Dates are no secret ("compie gli
anni il 9 novembre"). The topics and the level are read from bench/data/same_person_pairs.json and LoCoMo's
turns (docs/decisions/0029-secrets-keep-the-margin.md).
"""

import threading

import numpy as np

from memories.digests import distinctive_tokens, whole_values

# What a secret is about, as the topic gate's masked texts read ("someone" stands for any household name).
SECRET_TOPICS = (
    "someone has an illness",
    "someone was diagnosed with a disease",
    "someone takes medication every day",
    "someone had a heart attack or a stroke",
    "someone needs an operation in hospital",
    "someone is in therapy",
    "someone has a mental health problem, depression or anxiety",
    "someone is pregnant",
    "someone has a severe allergy",
    "someone has cancer",
    "someone has debts and owes money",
    "someone has money problems",
    "someone is getting divorced",
    "someone is having an affair",
    "someone's relationship is in trouble",
    "someone has an addiction",
    "someone drinks too much alcohol",
    "someone lost their job",
    "someone was arrested by the police",
    "the PIN of someone's card",
    "someone's password",
    "the access code of someone's lock",
)
# Everyday facts a household tells about its members: a secret topic must be closer than each of these.
EVERYDAY_TOPICS = (
    "someone works as a nurse",
    "someone has a job",
    "someone works at a bank",
    "someone works at a pharmacy",
    "someone has a pet",
    "someone likes to eat",
    "someone likes to drink",
    "someone drinks coffee or tea",
    "someone walks the dog",
    "someone does sport every week",
    "someone plays music",
    "someone goes to school",
    "someone has a hobby",
    "someone grows plants in the garden",
    "someone travels on holiday",
    "someone drives a car",
    "someone takes the bus or the tram",
    "someone has a friend",
    "someone's birthday",
    "thanks, that's great!",
)
# The least closeness to a secret topic that counts (same-person set: the secrets without a value sit at 0.32 and
# above, everyday facts closest to a secret topic at 0.24 and below).
TOPIC_LEVEL = 0.25

_topics: dict[str, tuple[np.ndarray, np.ndarray]] = {}
_topics_lock = threading.Lock()


def _topic_vectors(judge) -> tuple[np.ndarray, np.ndarray]:
    """The judge's vectors of the secret and the everyday topics, embedded once per process."""
    with _topics_lock:
        if judge.name not in _topics:
            _topics[judge.name] = (
                np.asarray(judge.embed_documents(list(SECRET_TOPICS))),
                np.asarray(judge.embed_documents(list(EVERYDAY_TOPICS))),
            )
        return _topics[judge.name]


def holds_value(text: str) -> bool:
    """True when ``text`` carries a number or code (not a date, not a bare year) or a whole value."""
    return bool(distinctive_tokens(text).numbers or whole_values(text))


def secret_topics(judge, vectors: np.ndarray) -> np.ndarray:
    """Per masked text's judge vector: whether its closest topic is a secret one, at least ``TOPIC_LEVEL`` close."""
    if not len(vectors):
        return np.zeros(0, dtype=bool)
    secret, everyday = _topic_vectors(judge)
    closest_secret = (vectors @ secret.T).max(axis=1)
    return (closest_secret >= TOPIC_LEVEL) & (closest_secret > (vectors @ everyday.T).max(axis=1))


def secrets_held(judge, texts: list[str], vectors: np.ndarray) -> list[bool]:
    """Per memory text: whether it holds a secret; ``vectors`` are the judge's vectors of the texts with the
    household's names masked."""
    topics = secret_topics(judge, vectors)
    return [bool(topic) or holds_value(text) for text, topic in zip(texts, topics, strict=True)]
