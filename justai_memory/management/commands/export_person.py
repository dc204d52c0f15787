import json
import os

from django.core.management.base import BaseCommand, CommandError

from justai_memory.household import person_export
from people.models import Person


class Command(BaseCommand):
    help = "Print (or write to --output) a JSON document of everything stored about and by one person."

    def add_arguments(self, parser):
        parser.add_argument("person_id", type=int)
        parser.add_argument("--output", help="Write to this file (mode 600) instead of standard output.")

    def handle(self, *args, person_id, output, **options):
        person = Person.objects.filter(pk=person_id).first()
        if person is None:
            raise CommandError(f"No person with id {person_id} (see manage.py list_household).")
        text = json.dumps(person_export(person=person), ensure_ascii=False, indent=2)
        if output:
            with open(output, "w", encoding="utf-8", opener=lambda p, flags: os.open(p, flags, 0o600)) as f:
                f.write(text + "\n")
            self.stderr.write(f"person {person_id} exported to {output}")
        else:
            self.stdout.write(text)
