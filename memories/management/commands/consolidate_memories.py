from django.core.management.base import BaseCommand, CommandError

from justai_core.errors import ApplicationError
from memories.actors import Actor
from memories.services.consolidate import Rule, memories_consolidate

DESCRIBE = {
    Rule.PRUNE: "prune: memory #{id} deleted (guess never recalled, over 90 days old)",
    Rule.MERGE: "merge: memory #{id} merged into #{related} (near-identical)",
    Rule.SUPERSEDE: "supersede: memory #{id} superseded by #{related} (same subject and predicate, older)",
    Rule.REPOINT: "repoint: superseded memory #{id} now points at #{related}",
}
STAGES = {
    Rule.PRUNE: "pruning",
    "clusters": "grouping similar memories",
    "pairs": "finding near-identical pairs, cluster by cluster",
    Rule.MERGE: "merging",
    Rule.SUPERSEDE: "superseding",
}


class Command(BaseCommand):
    help = (
        "Consolidate memories once: merge near-identical ones, supersede contradicted facts, delete guesses "
        "never recalled after 90 days. Refused while another run is going."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dry-run", action="store_true", help="Print what would change (memory ids and rules); change nothing."
        )

    def handle(self, *args, dry_run, verbosity, **options):
        last_shown: dict[str, int] = {}

        def progress(stage: str, done: int, total: int) -> None:
            # One line per stage at most every 10 %, so 100k memories give a dozen lines, not fifty.
            step = max(total // 10, 1)
            if verbosity < 1 or total == 0:
                return
            if done == total or done - last_shown.get(stage, 0) >= step:
                last_shown[stage] = done
                self.stdout.write(f"  {STAGES.get(stage, stage)}: {done}/{total} ({100 * done // total}%)")

        try:
            run = memories_consolidate(started_by=Actor.COMMAND, dry_run=dry_run, progress=progress)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        if dry_run or verbosity > 1:
            for change in run.changes:
                self.stdout.write(DESCRIBE[change.rule].format(id=change.memory_id, related=change.related_memory_id))
        summary = (
            f"merged {run.merged}, superseded {run.superseded}, deleted {run.deleted} "
            f"in {run.duration_ms} ms (run #{run.pk})"
        )
        if dry_run:
            self.stdout.write(f"Dry run, nothing changed: would have {summary}.")
        else:
            self.stdout.write(self.style.SUCCESS(f"Consolidated: {summary}."))
