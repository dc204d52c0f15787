"""The service's log formatter: a request cannot forge a log line.

Messages carry request data (the access log's path, Django's "Not Found: /path", an exception's
text), and a path may hold any character once its percent-escapes are decoded. Every control
character (C0, DEL, C1, and the Unicode line and paragraph separators) in a record's message is
written as an escape (``\\n``, ``\\x1b``, ``\\u2028``), and every further line of a record (its
traceback) is indented, so that each line that starts at the margin is one record, written by the
code that logged it.

A traceback is written without its exceptions' messages: a message may hold what a user said (a
database error quotes the row it refused, a parser the text it read), and a log outlives a forget.
The stack and each exception's type stay, which is what finding the fault needs.
"""

import logging
import re
import traceback

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def control_characters_escaped(text: str) -> str:
    """``text`` with every control character written as an escape (no line break, no terminal sequence)."""
    return _CONTROL.sub(_escape, text)


MESSAGE_WITHHELD = "(message not logged: it may hold content)"
_EXCEPTION_TYPE = re.compile(r"([A-Za-z_][\w.]*)(?::|\n|$)")


def traceback_without_messages(exc: BaseException) -> str:
    """``exc``'s traceback, its causes and contexts included, with each exception's type but not its message."""
    lines = []
    for line in traceback.TracebackException.from_exception(exc).format():
        if line.startswith(("Traceback (most recent call last):", "  ", "\nThe above exception", "\nDuring handling")):
            lines.append(line)
        elif exception_type := _EXCEPTION_TYPE.match(line):
            # The exception-only part, "Type: message" over any number of lines: the type only.
            lines.append(f"{exception_type.group(1)} {MESSAGE_WITHHELD}\n")
    return "".join(lines).rstrip("\n")


class Formatter(logging.Formatter):
    """logging.Formatter whose message has no control character, whose further lines are indented and whose
    tracebacks carry no exception message."""

    def formatException(self, ei) -> str:
        return traceback_without_messages(ei[1]) if ei and ei[1] is not None else super().formatException(ei)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = control_characters_escaped(record.message)
        return super().formatMessage(record)

    def format(self, record: logging.LogRecord) -> str:
        first, *rest = super().format(record).split("\n")
        return "\n".join([first, *("    " + control_characters_escaped(line) for line in rest)])


class ClientError(logging.Filter):
    """A record about a client's error (Django's DisallowedHost, logged as an ERROR with its traceback) as one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True
