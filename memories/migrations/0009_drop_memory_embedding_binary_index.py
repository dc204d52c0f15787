"""Drop the HNSW index over the memories' sign bits (migration 0006): consolidation no longer uses it.

Its near-duplicate search now compares memories within small clusters (memories/selectors/
near_duplicates.py) instead of searching an HNSW graph per memory and searching again, in this
second graph, what the first one lost. One index fewer for every new memory to update.
Reversing rebuilds it as 0006 did.
"""

from django.db import migrations

NAME = "memory_embedding_bq"


def drop(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {NAME}")


def create(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memories_memory'::regclass AND attname = 'embedding'"
        )
        dim = int(cursor.fetchone()[0])
        cursor.execute(
            f"CREATE INDEX IF NOT EXISTS {NAME} ON memories_memory USING hnsw "
            f"((binary_quantize(memories_memory.embedding)::bit({dim})) bit_hamming_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_memory_access_table")]

    operations = [migrations.RunPython(drop, create)]
