"""Recall's memories about the speaker, read newest first from an index instead of sorted from the heap.

``about_speaker_hits`` ranks the ABOUT_SPEAKER_WINDOW memories about a person stored last. With
only the foreign key's index PostgreSQL fetched every memory about them from the heap and sorted it
(~850 heap pages for a person at 100k memories, ~2 ms before every answer); this index hands them
over in order and the scan stops after the window. Its columns never change once set, so updates
of importance, dates or counts stay HOT (migration 0002). It leads with ``about_id``, so it serves
the foreign key's lookups too and replaces that index.
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memories", "0003_tombstone_embedding_storage_plain"),
        ("people", "0001_initial"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(fields=["about", "id"], name="memory_about_idx"),
        ),
        migrations.AlterField(
            model_name="memory",
            name="about",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="memories_about",
                to="people.person",
            ),
        ),
    ]
