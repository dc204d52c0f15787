from django.db import migrations


class Migration(migrations.Migration):
    """Leave room on each page of memories_memory so that updates of unindexed columns are HOT.

    A non-HOT update writes a new entry into every index, the HNSW index included, which costs a
    graph insertion (~2 ms at 100k memories). Room on the page lets PostgreSQL keep the new row
    version on the same page without touching any index when no indexed column changed: recall's
    access_count bump, consolidation folding counts and dates into the memory that stays, edits of
    scores. Applies to pages written from now on.
    """

    dependencies = [("memories", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (fillfactor = 80)",
            reverse_sql="ALTER TABLE memories_memory RESET (fillfactor)",
        )
    ]
