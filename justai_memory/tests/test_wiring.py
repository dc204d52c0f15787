"""The wiring: clear errors for a bad database, migrations in sync, schedules upserted by name."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command
from django_q.models import Schedule

from justai_memory.schedules import SCHEDULES, schedules_upsert

ROOT = Path(__file__).resolve().parents[2]


def run_manage(*args, **env):
    # As an operator's shell has it: without pytest's variables.
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )


@pytest.mark.slow
def test_unreachable_database_url_gives_one_clear_line():
    result = run_manage("migrate", DATABASE_URL="postgres://nobody@127.0.0.1:9/nowhere")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot reach the database") and "DATABASE_URL" in lines[0]


@pytest.mark.slow
def test_non_postgres_database_url_is_refused_in_one_line():
    result = run_manage("check", DATABASE_URL="sqlite:///tmp/x.db")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: DATABASE_URL must point to PostgreSQL (postgres://...) with pgvector installed."
    ]


@pytest.mark.django_db
def test_migrations_match_the_models():
    call_command("makemigrations", "--check", "--dry-run", verbosity=0)


@pytest.mark.django_db
def test_schedules_are_upserted_by_name():
    schedules_upsert()
    Schedule.objects.filter(name=SCHEDULES[0].name).update(func="stale.path")
    schedules_upsert()
    assert Schedule.objects.count() == len(SCHEDULES)
    assert Schedule.objects.get(name=SCHEDULES[0].name).func == SCHEDULES[0].func


@pytest.mark.django_db
def test_ensure_admin_creates_one_superuser_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("JUSTAI_ADMIN_USER", "hausadmin")
    monkeypatch.setenv("JUSTAI_ADMIN_PASSWORD", "a-long-secret-pass")
    call_command("ensure_admin")
    call_command("ensure_admin")
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.get()
    assert user.username == "hausadmin" and user.check_password("a-long-secret-pass")
    out = capsys.readouterr().out
    assert "a-long-secret-pass" not in out and "existing superuser" in out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "add_status"),
    [
        ("memory", 200),
        ("tombstone", 403),  # blocks come only from forgetting
        ("auditevent", 403),  # a record: only services write it
        ("conversation", 403),  # a record: only the internal API writes it
        ("person", 200),
        ("room", 200),
        ("event", 200),
    ],
)
def test_stock_admin_pages_open(admin_client, model, add_status):
    from django.apps import apps
    from django.urls import reverse

    meta = next(m for m in apps.get_models() if m._meta.model_name == model)._meta
    assert admin_client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")).status_code == 200
    assert admin_client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_add")).status_code == add_status


@pytest.mark.django_db
def test_the_embedded_server_runs_with_our_settings_file(settings):
    from django.db import connection

    if "DATABASE_URL" in os.environ:
        pytest.skip("an external DATABASE_URL is configured: its settings are its own")
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        assert cursor.fetchone()[0] == os.environ.get("EMBEDDED_DB_SHARED_BUFFERS", "160MB")


@pytest.mark.slow
def test_a_bad_shared_buffers_size_is_refused_in_one_line():
    result = run_manage(
        "check", DATABASE_URL="", EMBEDDED_DB_SHARED_BUFFERS="lots", EMBEDDED_DB_DIR="/tmp/justai-never-started"
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: EMBEDDED_DB_SHARED_BUFFERS='lots' is not a size such as 512MB or 1GB (units: kB, MB, GB)."
    ]
