"""Settings: importing them has no side effects, configuration errors are one line, tokens are trimmed and long."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], **env) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_SETTINGS_MODULE"))}
    environment.update(env)
    return subprocess.run(argv, cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60)


def settings_value(name: str, **env) -> subprocess.CompletedProcess:
    code = f"from django.conf import settings; print(repr(settings.{name}))"
    return run([sys.executable, "-c", code], DJANGO_SETTINGS_MODULE="justai_memory.settings", **env)


@pytest.mark.slow
def test_importing_the_settings_starts_no_database(tmp_path):
    result = settings_value("DATABASES", DATABASE_URL="", EMBEDDED_DB_DIR=str(tmp_path / "pg"))
    assert result.returncode == 0, result.stderr
    assert "justai_memory.serving.embedded_postgresql" in result.stdout
    assert not (tmp_path / "pg").exists()


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["manage.py", "check"], ["-m", "justai_memory.serving.supervisor"]])
def test_a_url_that_is_no_database_url_is_one_line(argv):
    result = run([sys.executable, *argv], DATABASE_URL="notaurl")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "error: DATABASE_URL must point to PostgreSQL (postgres://...) with pgvector installed."
    ]


@pytest.mark.slow
def test_a_socket_directory_in_database_url_is_decoded():
    result = settings_value("DATABASES['default']['HOST']", DATABASE_URL="postgresql://u@%2Frun%2Fpostgresql/db")
    assert result.stdout.strip() == "'/run/postgresql'", result.stderr


@pytest.mark.slow
def test_the_web_server_s_workers_inherit_settings_with_the_pool():
    """gunicorn's arbiter reads the settings (gunicorn_conf.py) before any worker imports asgi.py, and they fork from it."""
    code = (
        "import justai_memory.serving.gunicorn_conf; from django.conf import settings; "
        "print(settings.DATABASE_POOL, 'pool' in settings.DATABASES['default']['OPTIONS'])"
    )
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "DJANGO_", "DATABASE_POOL"))}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.split() == ["True", "True"], result.stderr


@pytest.mark.slow
def test_tokens_are_trimmed():
    result = settings_value(
        "INTERNAL_API_TOKENS", INTERNAL_API_TOKENS=" first-token-0123456789 , second-token-abcdefgh ,"
    )
    assert result.stdout.strip() == "['first-token-0123456789', 'second-token-abcdefgh']", result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["manage.py", "check"], ["-m", "justai_memory.serving.supervisor"]])
def test_a_short_token_is_refused_at_start(argv):
    result = run([sys.executable, *argv], INTERNAL_API_TOKENS="long-enough-token-123, tokB")
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: INTERNAL_API_TOKENS: every token needs at least 16")
    assert "tokB" not in result.stderr


def test_the_root_redirects_to_the_admin(client):
    response = client.get("/")
    assert response.status_code == 302 and response["Location"] == "/admin/"


def test_static_files_are_served_by_whitenoise(client):
    response = client.get("/static/admin/css/base.css")
    assert response.status_code == 200
    assert b"".join(response.streaming_content).strip()


@pytest.mark.slow
def test_the_time_zone_is_the_setting_or_the_machines_own_zone(tmp_path):
    from justai_memory.settings import _system_time_zone

    zone_file, link = tmp_path / "timezone", tmp_path / "localtime"
    assert _system_time_zone(zone_file, link) == "UTC"  # neither: UTC
    link.symlink_to("/usr/share/zoneinfo/Europe/Rome")
    assert _system_time_zone(zone_file, link) == "Europe/Rome"
    zone_file.write_text("Europe/Berlin\n")
    assert _system_time_zone(zone_file, link) == "Europe/Berlin"
    assert settings_value("TIME_ZONE", TIME_ZONE="Europe/Vienna").stdout.strip() == "'Europe/Vienna'"


@pytest.mark.slow
def test_the_admins_default_language_is_checked():
    assert settings_value("LANGUAGE_CODE", LANGUAGE_CODE="it").stdout.strip() == "'it'"
    result = settings_value("LANGUAGE_CODE", LANGUAGE_CODE="fr")
    assert result.returncode != 0 and "LANGUAGE_CODE must be one of en, de, it" in result.stderr
