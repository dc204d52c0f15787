"""django-q2 entry points of the memories app. Their dotted paths are stored in schedules: keep them stable."""

import logging

from justai_memory.errors import ApplicationError
from memories.services.consolidate import memories_consolidate

logger = logging.getLogger(__name__)


def memories_consolidate_job() -> int | None:
    """Daily consolidation (schedule ``memory.consolidate``); returns the run's id, None when another run was going."""
    try:
        run = memories_consolidate(started_by="schedule")
    except ApplicationError as exc:
        # Not a failure worth a retry: the run that holds the lock does the same work.
        logger.info("consolidation skipped: %s", exc.message)
        return None
    return run.pk
