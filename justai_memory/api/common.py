"""What every endpoint of the internal API shares: the strict input base, field types, id lookups, the error schema.

Every text a caller sends is checked for what PostgreSQL cannot store (NUL) or UTF-8 cannot encode
(lone surrogates) here, in the type, so no endpoint can forget it; the check names the field and
never echoes the text.
"""

import unicodedata
from datetime import datetime
from typing import Annotated, Any, TypeVar

from django.db.models import Model
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from ninja import Schema
from ninja.pagination import LimitOffsetPagination
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
)
from pydantic_core import PydanticCustomError

from justai_core.errors import ApplicationError
from memories.limits import (
    EARLIEST_TIMESTAMP,
    MAX_COMBINING_MARKS,
    MAX_ID,
    MAX_OFFSET,
    MAX_TEXT_CHARS,
    MAX_TEXT_TOKENS,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_MAX,
    timestamp_in_range,
)
from people.models import LANGUAGE_CODE_REGEX

M = TypeVar("M", bound=Model)
NOT_FOUND = "No {name} with id {pk}."


class Input(BaseModel):
    """A request body: strict types (no "1" for 1, no true for 1), unknown keys ignored.

    A plain pydantic model, not a ninja Schema: a Schema reads any object's attributes, and a request
    body must be a JSON object.
    """

    model_config = ConfigDict(strict=True, extra="ignore")


class ErrorOut(Schema):
    """Every answer that is not a success: what went wrong, and the input at fault (null when none)."""

    error: str
    field: str | None


def plain_text(value: str) -> str:
    """``value`` when PostgreSQL can store it: no NUL character, no lone surrogate."""
    if "\x00" in value:
        raise PydanticCustomError("text_nul", "must not contain NUL (U+0000) characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise PydanticCustomError("text_surrogate", "must not contain lone surrogates (invalid Unicode)") from None
    return value


def plain_json(value: Any) -> Any:
    """``value`` (a parsed JSON value) when every key and string in it is plain text."""
    if isinstance(value, str):
        plain_text(value)
    elif isinstance(value, dict):
        for key, item in value.items():
            plain_text(key)
            plain_json(item)
    elif isinstance(value, list):
        for item in value:
            plain_json(item)
    return value


def _combining_run(text: str) -> int:
    """The most combining marks (Unicode categories Mn, Me) in a row in ``text``."""
    longest = run = 0
    for char in text:
        if unicodedata.category(char) in ("Mn", "Me"):
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return longest


def cost_bounded(max_length: int):
    """A validator: the text, when what it costs is bounded: at most ``max_length`` characters after NFKC, at most
    MAX_COMBINING_MARKS combining marks on one character, at most MAX_TEXT_TOKENS of the embedder's tokens."""

    def check(value: str) -> str:
        normalised = unicodedata.normalize("NFKC", value)
        if len(normalised) > max_length:
            raise PydanticCustomError(
                "text_too_long_normalised",
                "is longer than {max_length} characters once normalised (NFKC)",
                {"max_length": max_length},
            )
        if _combining_run(normalised) > MAX_COMBINING_MARKS:
            raise PydanticCustomError(
                "text_marks", "has more than {marks} combining marks on one character", {"marks": MAX_COMBINING_MARKS}
            )
        from memories.embedders import get_embedder

        tokens = get_embedder().token_count(value) if len(value.encode()) > MAX_TEXT_TOKENS - 16 else None
        if tokens is not None and tokens > MAX_TEXT_TOKENS:
            raise PydanticCustomError(
                "text_tokens",
                "is longer than {tokens} tokens: denser than ordinary text, whose {chars} characters fit",
                {"tokens": MAX_TEXT_TOKENS, "chars": MAX_TEXT_CHARS},
            )
        return value

    return check


def _stripped(value: str) -> str:
    value = value.strip()
    if not value:
        raise PydanticCustomError("text_empty", "must not be empty")
    return value


def text(max_length: int = MAX_TEXT_CHARS) -> Any:
    """A string of at most ``max_length`` characters as sent (what the schema says), stripped, not empty after
    stripping, that PostgreSQL can store, and whose cost is bounded (``cost_bounded``)."""
    return Annotated[
        str,
        StringConstraints(min_length=1, max_length=max_length),
        AfterValidator(_stripped),
        AfterValidator(plain_text),
        AfterValidator(cost_bounded(max_length)),
    ]


Text = text()
LanguageCode = Annotated[str, StringConstraints(pattern=LANGUAGE_CODE_REGEX), AfterValidator(plain_text)]


def integral(value: Any) -> Any:
    # JSON has one number type: 12.0 is the integer 12 (as JSON Schema says); 12.5, "12" and true are not.
    return int(value) if isinstance(value, float) and value.is_integer() else value


Integer = Annotated[int, BeforeValidator(integral)]
# An id in a body, a query string or a path (``people/{person_id}``): 1 to PostgreSQL's bigint. The bounds
# come before the validator: after it, pydantic would write them into the JSON schema as "ge"/"le", which
# JSON Schema does not know, instead of "minimum"/"maximum".
Id = Annotated[int, Field(ge=1, le=MAX_ID), BeforeValidator(integral)]


class Page(LimitOffsetPagination):
    """ninja's limit/offset pagination with both bounded (memories/limits.py); ninja's own leaves them open."""

    class Input(Schema):
        limit: int = Field(PAGE_LIMIT_DEFAULT, ge=1, le=PAGE_LIMIT_MAX)
        offset: int = Field(0, ge=0, le=MAX_OFFSET)


def _timestamp(value: Any) -> datetime:
    if isinstance(value, str):
        # Django's parser lets a trailing newline through and Python's a trailing NUL (which PostgreSQL's
        # text would refuse later): a time is printable ASCII, nothing else.
        if not (value.isascii() and value.isprintable()):
            raise PydanticCustomError("timestamp_characters", "must be printable ASCII, without control characters")
        try:
            parsed = parse_datetime(value)
        except ValueError:  # well formed but impossible: 2025-02-30, 25:00, +99:00
            parsed = None
    else:
        parsed = value if isinstance(value, datetime) else None
    if parsed is None:
        raise PydanticCustomError("timestamp", "must be an ISO 8601 date and time, e.g. 2025-03-14T08:15:00+01:00")
    if timezone.is_naive(parsed):
        parsed = timezone.make_aware(parsed)
    try:
        in_range = timestamp_in_range(parsed)
    except OverflowError:  # year 1 or 9999 with an offset that leaves the calendar
        in_range = False
    if not in_range:
        raise PydanticCustomError(
            "timestamp_range",
            "must lie between {earliest} and one day from now",
            {"earliest": EARLIEST_TIMESTAMP.date()},
        )
    return parsed


# An ISO 8601 time the house reports (a time without zone is the household's TIME_ZONE), 1970 to now + 1 day.
Timestamp = Annotated[datetime, BeforeValidator(_timestamp), WithJsonSchema({"type": "string", "format": "date-time"})]


def lookup(model: type[M], pk: int | None, *, field: str, queryset=None) -> M | None:
    """The ``model`` row with id ``pk`` (None for None); a 404 naming ``field`` when there is none."""
    if pk is None:
        return None
    row = (queryset if queryset is not None else model.objects).filter(pk=pk).first()
    if row is None:
        raise ApplicationError(NOT_FOUND.format(name=model._meta.verbose_name, pk=pk), field=field, status=404)
    return row


# A time in an answer, as datetime.isoformat() writes it (microseconds and offset kept).
IsoDateTime = Annotated[datetime, PlainSerializer(lambda value: value.isoformat(), return_type=str)]

# The error answers every endpoint may give, for the OpenAPI document (the handlers in errors.py produce them).
ERRORS = {frozenset({400, 401, 403, 404, 405, 409, 410, 413, 500, 503}): ErrorOut}
