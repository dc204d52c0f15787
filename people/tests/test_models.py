import pytest
from django.db import IntegrityError, transaction

from people.models import Person, Room

pytestmark = pytest.mark.django_db


def test_person_names_are_unique_regardless_of_case():
    Person.objects.create(name="Julian")
    with pytest.raises(IntegrityError), transaction.atomic():
        Person.objects.create(name="julian")


@pytest.mark.parametrize("fields", [{"name": ""}, {"name": "Anna", "preferred_language": "Deutsch"}])
def test_person_rejects_bad_values(fields):
    with pytest.raises(IntegrityError), transaction.atomic():
        Person.objects.create(**fields)


def test_room_names_are_unique_and_not_empty():
    Room.objects.create(name="Küche")
    for name in ("KÜCHE", ""):
        with pytest.raises(IntegrityError), transaction.atomic():
            Room.objects.create(name=name)
