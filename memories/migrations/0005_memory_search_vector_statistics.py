"""Let ANALYZE track up to 10,000 common lexemes of the memories' text instead of 1,000.

Recall's keyword path lets a lexeme select rows only when the planner's statistics do not put it in
more than FREQUENT_LEXEME_ROWS memories (selectors/recall.py). With the default statistics target
(100) PostgreSQL keeps 1,000 lexemes; at 100k memories lexemes in several hundred memories fell
outside that list, still selected, and a question could make recall rank ~3,000 rows. At 1,000 the
list holds the lexemes down to that frequency (bench/recall.py: keyword statement p95 7.0 -> 3.6
ms at 100k). ANALYZE then samples up to 300,000 rows (~1.4 s at 100k memories); it runs once here so
that the longer list is there from the start, not only after autovacuum's next pass.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memories", "0004_memory_about_index")]

    operations = [
        migrations.RunSQL(
            ["ALTER TABLE memories_memory ALTER COLUMN search_vector SET STATISTICS 1000", "ANALYZE memories_memory"],
            reverse_sql="ALTER TABLE memories_memory ALTER COLUMN search_vector SET STATISTICS -1",
        )
    ]
