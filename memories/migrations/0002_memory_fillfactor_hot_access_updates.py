"""Leave 20% of each memories page free, so that recall's access bump is a HOT update.

Recall bumps ``access_count``/``last_accessed_at`` of what it returns, before every answer. Neither
column is indexed, so PostgreSQL can update the row in place (a heap-only tuple) when its page has
room; on a full page it writes a new row version and inserts it into every index, the HNSW graph
included (measured at 10k memories: 20 ms p50 for ten rows, against 3 ms with free space).
Existing pages get the space as rows are rewritten (or at once with VACUUM FULL memories_memory).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0001_initial")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE memories_memory SET (fillfactor = 80)",
            reverse_sql="ALTER TABLE memories_memory RESET (fillfactor)",
        )
    ]
