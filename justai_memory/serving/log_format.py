"""The service's log formatter: a request cannot forge a log line.

Messages carry request data (the access log's path, Django's "Not Found: /path", an exception's
text), and a path may hold any character once its percent-escapes are decoded. Every control
character (C0, DEL, C1, and the Unicode line and paragraph separators) in a record's message is
written as an escape (``\\n``, ``\\x1b``, ``\\u2028``), and every further line of a record (its
traceback) is indented, so that each line that starts at the margin is one record, written by the
code that logged it.
"""

import logging
import re

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


class Formatter(logging.Formatter):
    """logging.Formatter whose message has no control character and whose further lines are indented."""

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
