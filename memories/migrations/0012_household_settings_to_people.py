"""The household settings move to people.Household (the bottom layer, read by memories and transcripts).

The values of the one row are copied over, then MemorySettings is dropped; reversed, the model
comes back with the values of people.Household.
"""

from django.db import migrations

FIELDS = ["personal_memories_to_cloud", "transcript_retention_days", "sighting_retention_days", "event_retention_days"]


def copy(source, target):
    row = source.objects.filter(pk=1).values(*FIELDS).first()
    if row is not None:
        target.objects.update_or_create(pk=1, defaults=row)


def forward(apps, schema_editor):
    copy(apps.get_model("memories", "MemorySettings"), apps.get_model("people", "Household"))


def backward(apps, schema_editor):
    copy(apps.get_model("people", "Household"), apps.get_model("memories", "MemorySettings"))


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0011_tombstone_room_protect"),
        ("people", "0002_household"),
    ]

    operations = [
        migrations.RunPython(forward, backward),
        migrations.DeleteModel(name="MemorySettings"),
    ]
