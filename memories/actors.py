"""Who did something, as the audit trail and consolidation runs store it: a kind and an id, never a name or text.

Every stored actor string is made here, so that the admin's search ("admin:1", "job:memory.extract")
and the docs name one format.
"""


class Actor:
    """Constructors of actor strings; the values are what ``AuditEvent.actor`` and ``ConsolidationRun.started_by`` hold."""

    TOOL = "tool"  # the assistant's tools with no known speaker
    SCHEDULE = "schedule"  # a periodic job of the cluster
    COMMAND = "command"  # a management command
    API = "api"  # an internal API call that acts for the household, not a speaker (deleting a person)

    @staticmethod
    def admin(user) -> str:
        """A user of the Django admin."""
        return f"admin:{user.pk}"

    @staticmethod
    def speaker(person) -> str:
        """The speaker of a tool call: ``person:<id>``, or ``tool`` when unknown."""
        return f"person:{person.pk}" if person is not None else Actor.TOOL

    @staticmethod
    def through(connection, person) -> str:
        """A tool call for a speaker through an OAuth connection: ``connection:3/person:1`` (``connection:3/tool``
        without a speaker), so that the trail says through which client it came; without one, ``speaker``'s."""
        if connection is None:
            return Actor.speaker(person)
        return f"connection:{connection.pk}/{Actor.speaker(person)}"

    @staticmethod
    def job(name: str) -> str:
        """A queued job, by its stable name (``job:memory.extract``)."""
        return f"job:{name}"

    @staticmethod
    def consolidation(run_id: int) -> str:
        """The changes of consolidation run ``run_id``."""
        return f"consolidation:{run_id}"

    @staticmethod
    def event(event_id: int | None) -> str:
        """A household event that stored a memory (``event`` when it has no row)."""
        return f"event:{event_id}" if event_id is not None else "event"
