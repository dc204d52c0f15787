from django.core.management.base import BaseCommand, CommandError

from justai_core.errors import ApplicationError
from people.services import room_create


class Command(BaseCommand):
    help = "Add a room and print its id (the room_id of the API and the X-Room-Id of MCP)."

    def add_arguments(self, parser):
        parser.add_argument("name")

    def handle(self, *args, name, **options):
        try:
            room = room_create(name=name)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        self.stdout.write(f"room {room.pk}: {room.name}")
