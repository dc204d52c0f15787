from django.core.management.base import BaseCommand, CommandError

from justai_core.errors import ApplicationError
from people.services import person_create


class Command(BaseCommand):
    help = "Add a household member and print their id (the speaker_id of the API and the X-Speaker-Id of MCP)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--alias", action="append", default=[], help="Another name they go by (repeatable).")
        parser.add_argument("--language", default="en", help="Preferred language, ISO 639-1 (default: en).")

    def handle(self, *args, name, alias, language, **options):
        try:
            person = person_create(name=name, aliases=alias, preferred_language=language)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"person {person.pk}: {person.name}")
