"""The one application error that services raise; views, admin and commands present it."""


class ApplicationError(Exception):
    """A rule was broken. ``field`` names the input at fault (if any); ``status`` is the HTTP status to answer.

    ``needs`` names an input the rule needed and did not get when that is not the field at fault (a private
    memory needs a speaker: field ``scope``, needs ``speaker_id``). Fields are named as the JSON API names
    them; the message names no transport's field, each transport says where the input comes from
    (``with_source``): the JSON API its field, the MCP server its header or argument.
    """

    def __init__(self, message: str, *, field: str | None = None, status: int = 400, needs: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
        self.needs = needs


def with_source(message: str, source: str) -> str:
    """``message`` with where its input comes from: "A private memory needs its owner, a known speaker (speaker_id)."."""
    return f"{message.removesuffix('.')} ({source})."
