"""An HNSW index over the memories' sign bits, for consolidation's repeat searches (see memories/binary_index.py).

Built for the dimension the embedding column has now; ``reembed_memories`` rebuilds it when the
dimension changes. The SQL is spelled out here so that this migration does not change with the
module. About 14 s at 100k memories on two cores.
"""

from django.db import migrations

NAME = "memory_embedding_bq"


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


def drop(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX IF EXISTS {NAME}")


class Migration(migrations.Migration):
    dependencies = [("memories", "0005_memory_search_vector_statistics")]

    operations = [migrations.RunPython(create, drop)]
