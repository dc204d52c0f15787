from django.core.management.base import BaseCommand, CommandError

from justai_core.errors import ApplicationError
from transcripts.services.retention import transcripts_purge


class Command(BaseCommand):
    help = (
        "Delete conversations (with their turns), sightings and events past their retention days "
        "(Admin -> Settings). Memories learned from them stay."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="Count what would be deleted; delete nothing.")
        parser.add_argument("--batch-size", type=int, default=1000, help="Rows deleted per transaction (default 1000).")

    def handle(self, *args, dry_run, batch_size, verbosity, **options):
        def progress(name, done, total):
            if verbosity > 0:
                self.stdout.write(f"  {name}: {done}/{total} ({100 * done // max(total, 1)}%)")

        try:
            counts = transcripts_purge(dry_run=dry_run, batch_size=batch_size, progress=progress)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        summary = (
            f"{counts['conversations']} conversations ({counts['turns']} turns), "
            f"{counts['sightings']} sightings, {counts['events']} events"
        )
        if dry_run:
            self.stdout.write(f"Dry run: would delete {summary}. Nothing deleted.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Deleted {summary}."))
