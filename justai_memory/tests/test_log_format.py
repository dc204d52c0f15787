"""The log formatter: a message cannot start a line of its own or carry a terminal sequence."""

import logging
import sys

from justai_memory.serving.log_format import Formatter, control_characters_escaped


def record(message: str, *args, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("justai_memory.access", logging.INFO, __file__, 1, message, args, exc_info)


def test_control_characters_in_a_message_are_escaped():
    formatter = Formatter("%(levelname)s %(name)s: %(message)s")
    path = "/x\n2026-01-01 00:00:00,000 ERROR supervisor: forged\r\x1b[31m\u2028\x85\x00\x7f\tend"
    line = formatter.format(record('"GET %s" 404', path))
    assert line == (
        'INFO justai_memory.access: "GET /x\\n2026-01-01 00:00:00,000 ERROR supervisor: forged'
        '\\r\\x1b[31m\\u2028\\x85\\x00\\x7f\\tend" 404'
    )
    assert "\n" not in line


def test_a_traceback_stays_under_its_record():
    try:
        raise ValueError("bad\nERROR supervisor: forged\x1b")
    except ValueError:
        info = sys.exc_info()
    text = Formatter("%(levelname)s %(message)s").format(record("failed", exc_info=info))
    first, *rest = text.split("\n")
    assert first == "INFO failed" and rest
    assert all(line.startswith("    ") for line in rest)
    assert "\x1b" not in text


def test_a_traceback_names_each_exception_but_never_its_message():
    """A message may quote what a user said (a database error the row it refused); the log outlives a forget."""

    said = ["Der Code der Kellertür ist 61730", 'DETAIL: Key (content)=(Passwort "hunter2")\n  line two 61730']

    def store():  # the traceback shows these source lines: the content comes from ``said``, as it would
        try:
            raise KeyError(said[0])
        except KeyError as exc:
            raise ValueError(said[1]) from exc

    try:
        store()
    except ValueError:
        info = sys.exc_info()
    text = Formatter("%(levelname)s %(message)s").format(record("Internal Server Error: /admin/", exc_info=info))
    assert "61730" not in text and "hunter2" not in text and "Kellertür" not in text
    assert "KeyError (message not logged" in text and "ValueError (message not logged" in text
    assert "in store" in text and "direct cause" in text


def test_printable_text_is_unchanged():
    text = "Küche, Wohnzimmer: 20 °C ✓ città"
    assert control_characters_escaped(text) == text
