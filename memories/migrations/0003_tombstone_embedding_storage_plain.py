"""Keep tombstone vectors inline in the table row, so the forget-block check reads no TOAST.

Every store compares its texts with every tombstone (selectors/tombstones.py). pgvector's type
stores a vector of more than ~2 KB (a 512-d one is 2,056 bytes) out of line, in the TOAST table,
so each tombstone costs two TOAST index lookups per check. Inline, the check of one text against
1,000 tombstones went from 3.1 to 1.3 ms (p50), and that of 20 texts from ~2 ms of TOAST reads to
none (bench DB of bench/extract.py). The column keeps no fixed dimension. PLAIN fits a row of any
vector up to about 2,000 dimensions, which is also the HNSW index's limit for the memories' own
column; MAIN (inline, compression tried first, out of line only when the row would not fit a page)
reads the same and is the choice should a larger embedder ever be supported.

Existing vectors are rewritten so they move inline now (subvector returns a fresh copy of the
whole vector); PostgreSQL would otherwise keep them out of line until they are next updated.
"""

from django.db import migrations

REWRITE = "UPDATE memories_tombstone SET embedding = subvector(embedding, 1, vector_dims(embedding))"


class Migration(migrations.Migration):
    dependencies = [("memories", "0002_memory_fillfactor_hot_access_updates")]

    operations = [
        migrations.RunSQL(
            ["ALTER TABLE memories_tombstone ALTER COLUMN embedding SET STORAGE PLAIN", REWRITE],
            # EXTERNAL is pgvector's default storage for the vector type.
            reverse_sql=["ALTER TABLE memories_tombstone ALTER COLUMN embedding SET STORAGE EXTERNAL", REWRITE],
        )
    ]
