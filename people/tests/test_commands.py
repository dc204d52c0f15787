"""add_person, add_room and list_household print the ids that the API and MCP clients need."""

import pytest
from django.core.management import CommandError, call_command

from people.models import Person, Room

pytestmark = pytest.mark.django_db


def test_add_person_and_room_print_their_ids_and_list_household_lists_them(capsys):
    call_command("add_room", "Küche")
    call_command("add_person", "Anna", "--alias", "Anni", "--alias", "Mama", "--language", "de")
    room, anna = Room.objects.get(), Person.objects.get()
    out = capsys.readouterr().out
    assert f"room {room.pk}: Küche" in out and f"person {anna.pk}: Anna" in out
    assert anna.aliases == ["Anni", "Mama"] and anna.preferred_language == "de"
    call_command("list_household")
    listing = capsys.readouterr().out
    assert f"  {room.pk}\tKüche" in listing
    assert f"  {anna.pk}\tAnna\tde\taliases: Anni, Mama" in listing


def test_add_person_reports_bad_input_as_a_command_error():
    call_command("add_person", "Anna")
    with pytest.raises(CommandError, match="already a person named"):
        call_command("add_person", "anna")
    with pytest.raises(CommandError, match="preferred_language"):
        call_command("add_person", "Ben", "--language", "Deutsch")
    assert Person.objects.count() == 1
