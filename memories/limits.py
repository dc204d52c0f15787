"""The size and range limits of what the assistant and the house may send; the API schemas and the services read them here.

One place, so that the internal API's schemas (and the OpenAPI document and tool schemas made from
them), the services behind them and the admin forms cannot disagree.
"""

from datetime import UTC, datetime, timedelta

from django.utils import timezone

# Texts: memory content, recall and forget queries, conversation turns (after stripping).
MAX_TEXT_CHARS = 4000
MAX_TOKEN_CHARS = 200  # a forget confirmation token
MAX_EVENT_KIND_CHARS = 64
MAX_ROLE_CHARS = 16
# What a text costs is bounded too, not only its length as sent: NFKC may expand it ("\ufdfa" is 18
# characters), and a character with many combining marks ("a" and 3,999 accents) is one character per
# mark to a tokenizer, so one 4,000-character text was 4,000 tokens, eight passes of e5's model (40 s).
MAX_COMBINING_MARKS = 8  # in a row on one character, after NFKC (Unicode's stream-safe text allows 30)
# The embedder's tokens. One rule with MAX_TEXT_CHARS: ordinary text of that many characters in every supported
# language fits, so the schema's length is the limit a caller meets; only text far denser in tokens than prose
# (another script, marks, symbols) meets this one. e5-small at 4,000 characters (bench/text_limits.py, the densest
# of 40 windows each): German 1,051, Italian 1,038, Spanish 1,025, English 1,027; Chinese ~1,500.
MAX_TEXT_TOKENS = 1280
DATE_SEARCH_CHARS = 300  # a question's dates are read in its first characters (dateparser: ~2 s per 1,000)
LANGUAGE_DETECT_CHARS = 1000  # a text's language is told from its first characters

# Recall: how many memories one call returns.
RECALL_LIMIT_DEFAULT = 10
RECALL_LIMIT_MAX = 50

# Integers: every id, offset and count a caller sends is bounded (the OpenAPI document says so), never
# beyond PostgreSQL's bigint, which the database would refuse with an error instead of an answer.
MAX_ID = 2**63 - 1  # ids (room_id, speaker_id, memory_ids[], path ids, ...), 1 to this
MAX_OFFSET = 2**63 - 1  # the offset of a listed page, 0 to this

# Lists in one call.
PAGE_LIMIT_DEFAULT = 100  # the limit of a listed page (people/{id}/memories, memories?kind=procedure)
PAGE_LIMIT_MAX = 100
MAX_TURNS_PER_CALL = 100
MAX_MEMORY_IDS = 100  # memory.forget's memory_ids

# Request bodies of the internal API: bytes, and nesting of JSON arrays and objects.
MAX_BODY_BYTES = 64 * 1024
MAX_JSON_DEPTH = 32

# Times the house reports (sightings, events): from the epoch to a day ahead (clocks drift, zones differ).
EARLIEST_TIMESTAMP = datetime(1970, 1, 1, tzinfo=UTC)
FUTURE_SLACK = timedelta(days=1)
TIMESTAMP_OUT_OF_RANGE = "'{field}' must lie between 1970-01-01 and one day from now."


def timestamp_in_range(value: datetime) -> bool:
    """Whether an aware ``value`` lies between the epoch and one day from now."""
    return EARLIEST_TIMESTAMP <= value <= timezone.now() + FUTURE_SLACK
