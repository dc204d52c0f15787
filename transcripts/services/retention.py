"""Retention: transcripts, sightings and events are deleted once past the household's retention days."""

from collections.abc import Callable
from datetime import timedelta

from django.db import transaction
from django.db.models.functions import Coalesce
from django.utils import timezone

from justai_core.errors import ApplicationError
from memories.locks import LockId, advisory_lock
from people.models import Household
from transcripts.models import Conversation, Event, Sighting, Turn

PURGE_RUNNING = "Another purge is running; try again when it has finished."


def purge_candidates(*, now=None) -> dict:
    """What is past retention now: querysets of conversations (with their turns), sightings and events."""
    now = now or timezone.now()
    household = Household.load()
    transcript_cutoff = now - timedelta(days=household.transcript_retention_days)
    conversations = Conversation.objects.alias(last=Coalesce("ended_at", "started_at")).filter(
        last__lt=transcript_cutoff
    )
    return {
        "conversations": conversations,
        "sightings": Sighting.objects.filter(seen_at__lt=now - timedelta(days=household.sighting_retention_days)),
        "events": Event.objects.filter(occurred_at__lt=now - timedelta(days=household.event_retention_days)),
    }


def transcripts_purge(
    *,
    now=None,
    dry_run: bool = False,
    batch_size: int = 1000,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, int]:
    """Delete conversations (and their turns), sightings and events past retention, in batches; counts per kind.

    Memories learned from a purged conversation stay (they refer to it by ``conversation:<id>`` only).
    With ``dry_run`` nothing is deleted. Overlapping runs are refused (advisory lock).
    """
    if batch_size < 1:
        raise ApplicationError("batch_size must be at least 1.", field="batch_size")
    candidates = purge_candidates(now=now)
    totals = {name: queryset.count() for name, queryset in candidates.items()}
    totals["turns"] = Turn.objects.filter(conversation__in=candidates["conversations"]).count()
    if dry_run:
        return totals
    with advisory_lock(LockId.PURGE) as acquired:
        if not acquired:
            raise ApplicationError(PURGE_RUNNING, status=409)
        for name, queryset in candidates.items():
            done = 0
            while ids := list(queryset.order_by().values_list("pk", flat=True)[:batch_size]):
                # One short transaction per batch: a long purge never holds a long lock.
                with transaction.atomic():
                    queryset.model.objects.filter(pk__in=ids).delete()
                done += len(ids)
                if progress:
                    progress(name, done, totals[name])
    return totals
