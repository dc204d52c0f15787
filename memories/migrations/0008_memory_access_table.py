"""Recall's access counts move out of the memory rows into a narrow table of their own (MemoryAccess).

Bumping them in the memory's wide row wrote a full-page image of each page first touched after a
checkpoint (~100 kB of WAL per recall) and, on a page without room, a new row version inserted into
every index, the HNSW graphs included: the bump's p95 was 10-12 ms at 100k memories, 1.5 ms in
the narrow table. The counts carry over; memories never recalled get no row. The new table leaves
room on its pages (fillfactor 70) so that a bump stays an in-place (HOT) update.
"""

import django.db.models.deletion
from django.db import migrations, models

COPY_SQL = """
INSERT INTO memories_memoryaccess (memory_id, count, last_accessed_at)
SELECT id, access_count, coalesce(last_accessed_at, updated_at)
FROM memories_memory
WHERE access_count > 0 OR last_accessed_at IS NOT NULL
"""
COPY_BACK_SQL = """
UPDATE memories_memory m SET access_count = a.count, last_accessed_at = a.last_accessed_at
FROM memories_memoryaccess a WHERE a.memory_id = m.id
"""


class Migration(migrations.Migration):
    dependencies = [("memories", "0007_memory_search_vector_gin_no_pending_list")]

    operations = [
        migrations.CreateModel(
            name="MemoryAccess",
            fields=[
                (
                    "memory",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="access",
                        serialize=False,
                        to="memories.memory",
                    ),
                ),
                ("count", models.PositiveIntegerField(default=0)),
                ("last_accessed_at", models.DateTimeField()),
            ],
            options={"verbose_name": "memory access"},
        ),
        migrations.RunSQL(
            "ALTER TABLE memories_memoryaccess SET (fillfactor = 70)",
            reverse_sql=migrations.RunSQL.noop,
        ),
        migrations.RunSQL(COPY_SQL, reverse_sql=COPY_BACK_SQL),
        migrations.RemoveField(model_name="memory", name="access_count"),
        migrations.RemoveField(model_name="memory", name="last_accessed_at"),
    ]
