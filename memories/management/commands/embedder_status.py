from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError

from memories.embedding_space import embedding_space_verify


class Command(BaseCommand):
    help = "Check that the configured MEMORY_EMBEDDER matches the vectors in the database (records it on first use)."

    def handle(self, *args, **options):
        if settings.MEMORY_EMBEDDER_FALLBACK:
            self.stderr.write(self.style.WARNING(settings.MEMORY_EMBEDDER_FALLBACK))
        try:
            space = embedding_space_verify()
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"Embedder: {space.embedder} ({space.dim}-d), matches the database.")
