from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from memories.embedders import get_embedder
from memories.models import EmbeddingSpace, Memory
from memories.services.embeddings import memories_reembed, tombstone_embedders_check


class Command(BaseCommand):
    help = (
        "Re-embed every memory with the configured MEMORY_EMBEDDER (run after switching embedders). "
        "Resumable: an interrupted run keeps the batches it finished, and the next run goes on from there. "
        "Forget blocks keep working: tombstones keep the vector of the embedder that made them."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=256, help="Memories embedded per batch (default 256).")
        parser.add_argument("--dry-run", action="store_true", help="Say what would be done; change nothing.")

    def handle(self, *args, batch_size, dry_run, verbosity, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        try:
            target = get_embedder()
            space = EmbeddingSpace.objects.filter(pk=1).first()
            total = Memory.objects.count()
            self.stdout.write(
                f"Re-embedding {total} memories: {space.embedder if space else '(none recorded)'} -> "
                f"{target.name} ({target.dim}-d)."
            )
            if dry_run:
                names = tombstone_embedders_check()
                self.stdout.write(
                    f"Dry run: nothing changed. Forget blocks are checked with: {', '.join(names) or '-'}."
                )
                return
            # A bar with the rate and the time left, on stderr (tqdm's default), updated after each batch.
            with tqdm(total=total, unit=" memories", disable=verbosity == 0, smoothing=0.1) as bar:
                started = []

                def progress(done, total):
                    bar.total = total
                    if not started:  # the first call: what an earlier run staged is done, not part of the rate
                        started.append(done)
                        bar.initial = bar.n = bar.last_print_n = done
                        bar.refresh()
                    else:
                        bar.update(done - bar.n)

                stats = memories_reembed(batch_size=batch_size, progress=progress)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        resumed = f" ({stats['resumed']} staged by an earlier run)" if stats["resumed"] else ""
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-embedded {stats['reembedded']} memories with {stats['embedder']} ({stats['dim']}-d){resumed}."
            )
        )
