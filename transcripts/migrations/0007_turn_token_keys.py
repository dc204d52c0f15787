import django.contrib.postgres.fields
import django.contrib.postgres.indexes
from django.db import migrations, models

FILL_BATCH = 2000


def fill_token_keys(apps, schema_editor):
    """Each kept turn's value keys, from its text, with the digest key outside the database (hence Python, not SQL).

    Uses the current token rules (memories.digests): the keys must be what a forget computes now. A row this
    misses stays NULL, which the next forget reads whole and fills.
    """
    from memories.digests import token_keys

    Turn = apps.get_model("transcripts", "Turn")
    rows = Turn.objects.filter(token_keys__isnull=True).order_by("pk").values_list("pk", "text")
    batch = []
    for pk, text in rows.iterator(chunk_size=FILL_BATCH):
        batch.append(Turn(pk=pk, token_keys=token_keys(text)))
        if len(batch) >= FILL_BATCH:
            Turn.objects.bulk_update(batch, ["token_keys"])
            batch.clear()
    Turn.objects.bulk_update(batch, ["token_keys"])


class Migration(migrations.Migration):
    dependencies = [
        ("people", "0005_field_verbose_names"),
        ("transcripts", "0006_field_verbose_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="turn",
            name="token_keys",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.BigIntegerField(),
                blank=True,
                help_text="Index keys of the keyed digests of the text's values (memories/digests.py); no text.",
                null=True,
                size=None,
                verbose_name="value keys",
            ),
        ),
        migrations.RunPython(fill_token_keys, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="turn",
            index=django.contrib.postgres.indexes.GinIndex(fields=["token_keys"], name="turn_token_keys_idx"),
        ),
        migrations.AddIndex(
            model_name="turn",
            index=models.Index(
                condition=models.Q(("token_keys__isnull", True)), fields=["id"], name="turn_keys_missing_idx"
            ),
        ),
    ]
