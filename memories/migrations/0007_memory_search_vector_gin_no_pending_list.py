"""Memories go straight into the full-text (GIN) index: no pending list.

With ``fastupdate`` on (PostgreSQL's default) new entries wait in a pending list until it reaches
``gin_pending_list_limit`` (4 MB) or the table is vacuumed, and every search scans the whole list.
With the list near full, recall's keyword search read ~490 extra pages: 3.1 ms instead of 0.6 ms at
100k memories. Without it each insert updates the index itself; remember's time did not change
measurably (bench/recall.py). The index is altered in place, not rebuilt, and the entries already
pending are moved into it.
"""

from django.contrib.postgres.indexes import GinIndex
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0006_memory_embedding_binary_index")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    [
                        "ALTER INDEX memory_search_vector_gin SET (fastupdate = off)",
                        "SELECT gin_clean_pending_list('memory_search_vector_gin')",
                    ],
                    reverse_sql="ALTER INDEX memory_search_vector_gin RESET (fastupdate)",
                )
            ],
            state_operations=[
                migrations.RemoveIndex(model_name="memory", name="memory_search_vector_gin"),
                migrations.AddIndex(
                    model_name="memory",
                    index=GinIndex(fields=["search_vector"], name="memory_search_vector_gin", fastupdate=False),
                ),
            ],
        )
    ]
