"""Refresh, code exchange and approval of one grant at the same moment, against a real server process (slow).

Each race is fired several times (``TRIALS``); bench/oauth_races.py fires each 50 times and prints the counts.
"""

import pytest

from connections.models import Connection
from connections.tests.oauth_races import Household, approval_race, code_race, refresh_race
from justai_memory.tests.test_mcp import mcp_url  # noqa: F401 (the server fixture)
from people.tests.factories import RoomFactory

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "race-test-password"
TRIALS = 8


@pytest.fixture
def household(mcp_url, admin_user, settings):  # noqa: F811
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # as the server checks it
    admin_user.set_password(PASSWORD)
    admin_user.save()
    room = RoomFactory(name="Kitchen")
    choices = {"room": room.pk, "speaker": "", "model_location": "local", "access": "memory:read"}
    return Household(mcp_url.removesuffix("/mcp"), admin_user.username, PASSWORD), choices


def test_two_refreshes_at_once_give_one_new_pair_and_invalid_grant(household):
    for _ in range(TRIALS):
        trial = refresh_race(*household)
        assert sorted(trial.statuses) == [200, 400], trial
        assert trial.errors.count("invalid_grant") == 1 and trial.json_answers == 2, trial
        assert trial.live_tokens == 1, trial  # the winner's pair works: the loser did not revoke its family


def test_a_code_exchanged_twice_at_once_leaves_no_live_token(household):
    for _ in range(TRIALS):
        trial = code_race(*household)
        assert all(status in (200, 400) for status in trial.statuses) and 400 in trial.statuses, trial
        assert trial.errors.count("invalid_grant") >= 1 and trial.json_answers == 2, trial
        assert trial.live_tokens == 0, trial


def test_two_allow_clicks_at_once_leave_one_live_connection(household):
    for _ in range(TRIALS):
        trial, client_id = approval_race(*household)
        assert trial.statuses == [302, 302], trial
        assert Connection.objects.active().filter(application__client_id=client_id).count() == 1
