from django.core.management.base import BaseCommand

from people.models import Person, Room


class Command(BaseCommand):
    help = "List the household's rooms and people with their ids."

    def handle(self, *args, **options):
        rooms, people = list(Room.objects.order_by("pk")), list(Person.objects.order_by("pk"))
        self.stdout.write(f"rooms ({len(rooms)}):")
        for room in rooms:
            self.stdout.write(f"  {room.pk}\t{room.name}")
        self.stdout.write(f"people ({len(people)}):")
        for person in people:
            aliases = f"\taliases: {', '.join(person.aliases)}" if person.aliases else ""
            self.stdout.write(f"  {person.pk}\t{person.name}\t{person.preferred_language}{aliases}")
