"""Drop the HNSW index over the memories' sign bits (migration 0006): consolidation no longer uses it.

Its near-duplicate search now compares memories within small clusters (memories/selectors/
near_duplicates.py) instead of searching an HNSW graph per memory and searching again, in this
second graph, what the first one lost. One index fewer for every new memory to update.
Reversing rebuilds it with 0006's own code.
"""

from importlib import import_module

from django.db import migrations

binary_index = import_module("memories.migrations.0006_memory_embedding_binary_index")


class Migration(migrations.Migration):
    dependencies = [("memories", "0008_memory_access_table")]

    operations = [migrations.RunPython(binary_index.drop, binary_index.create)]
