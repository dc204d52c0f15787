"""Every periodic job, declared in code and upserted by name (django-q2's schedule() raises on a duplicate).

The dotted paths are stored in the database: keep them stable.
"""

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone
from django_q.models import Schedule


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    func: str
    schedule_type: str
    minutes: int | None = None
    first_run_in: timedelta = timedelta(minutes=1)


SCHEDULES = [
    ScheduleSpec("memory.consolidate", "memories.jobs.memories_consolidate_job", Schedule.DAILY),
    ScheduleSpec("memory.extract_sweep", "transcripts.jobs.conversations_extract_sweep_job", Schedule.MINUTES, 10),
    # Conversations waiting for the model are extracted within a minute of its answering again.
    ScheduleSpec("memory.extract_resume", "transcripts.jobs.conversations_extract_resume_job", Schedule.MINUTES, 1),
    ScheduleSpec("transcripts.purge", "transcripts.jobs.transcripts_purge_job", Schedule.DAILY),
    # Expired OAuth codes and tokens, and refresh tokens revoked longer ago than they could have been valid
    # (django-oauth-toolkit's own clean-up; every hourly refresh of a connection leaves one revoked behind).
    ScheduleSpec("oauth.clear_expired", "oauth2_provider.models.clear_expired", Schedule.DAILY),
]


def schedules_upsert() -> list[Schedule]:
    """Create or update every declared schedule by name; a new one first runs shortly after."""
    result = []
    for spec in SCHEDULES:
        schedule, _ = Schedule.objects.update_or_create(
            name=spec.name,
            defaults={"func": spec.func, "schedule_type": spec.schedule_type, "minutes": spec.minutes, "repeats": -1},
            create_defaults={
                "func": spec.func,
                "schedule_type": spec.schedule_type,
                "minutes": spec.minutes,
                "repeats": -1,
                "next_run": timezone.now() + spec.first_run_in,
            },
        )
        result.append(schedule)
    return result
