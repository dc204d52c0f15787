"""The one application error that services raise; views, admin and commands present it."""


class ApplicationError(Exception):
    """A rule was broken. ``field`` names the input at fault (if any); ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, *, field: str | None = None, status: int = 400):
        super().__init__(message)
        self.message = message
        self.field = field
        self.status = status
