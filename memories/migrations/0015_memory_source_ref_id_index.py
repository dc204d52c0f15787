from django.db import migrations, models


class Migration(migrations.Migration):
    """The index on source_ref gains the id: recall reads a conversation's memories in the order they were stored."""

    dependencies = [("memories", "0014_tombstone_word_marks")]

    operations = [
        migrations.RemoveIndex(model_name="memory", name="memory_source_ref_idx"),
        migrations.AddIndex(
            model_name="memory",
            index=models.Index(fields=["source_ref", "id"], name="memory_source_ref_id_idx"),
        ),
    ]
