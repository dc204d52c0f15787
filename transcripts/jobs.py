"""django-q2 entry points of the transcripts app. They take ids, call one service and log ids and counts.

The dotted paths are stored in queued tasks and schedules (justai_memory/schedules.py): keep them stable.
"""

import logging

from transcripts.models import Conversation
from transcripts.services.conversations import conversations_sweep
from transcripts.services.extraction.run import conversation_extract, conversations_extract_resume
from transcripts.services.retention import transcripts_purge

logger = logging.getLogger(__name__)


def conversation_extract_job(conversation_id: int) -> str:
    """memory.extract: extract one ended conversation; returns its extraction status, 'busy' or 'gone'."""
    conversation = conversation_extract(conversation_id=conversation_id)
    if conversation is not None:
        status = conversation.extraction_status
    else:
        status = "busy" if Conversation.objects.filter(pk=conversation_id).exists() else "gone"
    logger.info("memory.extract conversation=%s status=%s", conversation_id, status)
    return status


def conversations_extract_sweep_job() -> dict:
    """memory.extract_sweep: end idle conversations; re-queue those whose extraction job was lost or may now run locally."""
    counts = conversations_sweep()
    logger.info("memory.extract_sweep %s", counts)
    return counts


def conversations_extract_resume_job() -> int:
    """memory.extract_resume: queue the conversations waiting for the model once it answers (a probe only when any wait)."""
    resumed = conversations_extract_resume()
    if resumed:
        logger.info("memory.extract_resume resumed=%s", resumed)
    return resumed


def transcripts_purge_job() -> dict:
    """transcripts.purge: delete transcripts, sightings and events past their retention."""
    counts = transcripts_purge()
    logger.info("transcripts.purge %s", counts)
    return counts
