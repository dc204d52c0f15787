"""django-q2 entry points of the memories app. Their dotted paths are stored in schedules: keep them stable."""

import logging

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.services.consolidate import memories_consolidate, memories_consolidate_queued

logger = logging.getLogger(__name__)


def memories_consolidate_job(run_id: int | None = None) -> int | None:
    """Consolidate once: the daily schedule ``memory.consolidate`` (no id) or a queued run (the admin's button).

    Returns the run's id; None when another run was going (schedule) or the queued run is gone.
    """
    if run_id is not None:
        run = memories_consolidate_queued(run_id=run_id)
        return run.pk if run else None
    try:
        run = memories_consolidate(started_by=Actor.SCHEDULE)
    except ApplicationError as exc:
        # Not a failure worth a retry: the run that holds the lock does the same work.
        logger.info("consolidation skipped: %s", exc.message)
        return None
    return run.pk
