"""Two requests of one OAuth client at the same moment, against a running server (the tests and bench/oauth_races.py).

Each race starts from a fresh client and approval and fires its two requests from two threads released by one
``threading.Barrier``, each on its own connection: the server sees them truly at once. A trial returns what a
client could observe: the two answers (status, OAuth error) and whether the tokens it was given still open /mcp.
"""

import threading
from dataclasses import dataclass, field
from urllib.parse import urlparse

import httpx

from connections.tests.oauth_flow import authorize_query, code_from, hidden_fields, pkce

REDIRECT = "http://127.0.0.1:33418/callback"
TIMEOUT = 60
# No Django here (bench/oauth_races.py runs these against a service without setting Django up): the MCP client's
# first request and the barrier are written out rather than imported from test_mcp.py and memories' test_races.py.
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "race", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@dataclass
class Trial:
    """What one race left: the two answers' statuses and OAuth errors, the tokens still live, connections live."""

    statuses: list[int] = field(default_factory=list)
    errors: list[str | None] = field(default_factory=list)
    live_tokens: int = 0
    json_answers: int = 0  # answers whose Content-Type is application/json


def one_after_the_other(*calls):
    """The calls in sequence (a race's baseline)."""
    return [call() for call in calls]


def at_once(*calls):
    """The calls on threads released together by a barrier; their results in order (an exception re-raised)."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def run(index, call):
        barrier.wait()
        try:
            results[index] = call()
        except Exception as exc:  # re-raised below, in the caller's thread
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


class Household:
    """An admin's browser logged into the server, and a client that registered itself (public, PKCE)."""

    def __init__(self, origin: str, username: str, password: str):
        self.origin = origin
        self.browser = httpx.Client(base_url=origin, timeout=TIMEOUT)
        login = self.browser.get("/admin/login/")
        answer = self.browser.post(
            "/admin/login/", data={**hidden_fields(login.text), "username": username, "password": password}
        )
        assert answer.status_code == 302, answer.text[:500]

    def register(self) -> str:
        """A new client (RFC 7591, no secret); its client_id."""
        answer = httpx.post(
            f"{self.origin}/oauth/register/",
            json={"redirect_uris": [REDIRECT], "client_name": "race", "token_endpoint_auth_method": "none"},
            timeout=TIMEOUT,
        )
        assert answer.status_code == 201, answer.text
        return answer.json()["client_id"]

    def consent_form(self, client_id: str, challenge: str, choices: dict) -> tuple[str, dict]:
        """The consent page's form for the client, filled with ``choices`` and Allow: (path, fields)."""
        url = f"/oauth/authorize/?{authorize_query(client_id, REDIRECT, challenge=challenge)}"
        page = self.browser.get(url)
        assert page.status_code == 200, page.text[:1000]
        return urlparse(url).path, {**hidden_fields(page.text), **choices, "allow": "Allow"}

    def allow(self, path: str, fields: dict) -> httpx.Response:
        return self.browser.post(path, data=fields)

    def approved_code(self, client_id: str, choices: dict) -> tuple[str, str]:
        """An approval of the client: its code and PKCE verifier."""
        verifier, challenge = pkce()
        answer = self.allow(*self.consent_form(client_id, challenge, choices))
        assert answer.status_code == 302, answer.text[:1000]
        return code_from(answer.headers["location"])["code"], verifier

    def exchange(self, client_id: str, code: str, verifier: str) -> httpx.Response:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": verifier,
        }
        return httpx.post(f"{self.origin}/oauth/token/", data=data, timeout=TIMEOUT)

    def refresh(self, client_id: str, refresh_token: str) -> httpx.Response:
        data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id}
        return httpx.post(f"{self.origin}/oauth/token/", data=data, timeout=TIMEOUT)

    def opens_mcp(self, access_token: str) -> bool:
        answer = httpx.post(
            f"{self.origin}/mcp",
            json=INITIALIZE,
            headers={"Authorization": f"Bearer {access_token}", **ACCEPT},
            timeout=TIMEOUT,
        )
        assert answer.status_code in (200, 401), answer.text[:500]
        return answer.status_code == 200

    def tokens_live(self, client_id: str, answers: list[httpx.Response]) -> int:
        """How many of the pairs the answers gave still work: the access token opens /mcp, or the refresh token
        gets a new one (which is then counted as the pair's)."""
        live = 0
        for answer in answers:
            if answer.status_code != 200:
                continue
            tokens = answer.json()
            if self.opens_mcp(tokens["access_token"]) or self.refresh(client_id, tokens["refresh_token"]).is_success:
                live += 1
        return live


def _observed(answers: list[httpx.Response]) -> Trial:
    trial = Trial()
    for answer in answers:
        trial.statuses.append(answer.status_code)
        is_json = answer.headers.get("content-type", "").startswith("application/json")
        trial.json_answers += is_json
        trial.errors.append(answer.json().get("error") if is_json and answer.status_code >= 400 else None)
    return trial


def refresh_race(household: Household, choices: dict, fire=at_once) -> Trial:
    """One refresh token sent twice (by ``fire``: at once, or one after the other for a baseline);
    ``live_tokens``: of the pairs issued, how many work afterwards."""
    client_id = household.register()
    first = household.exchange(client_id, *household.approved_code(client_id, choices))
    assert first.status_code == 200, first.text
    refresh_token = first.json()["refresh_token"]
    answers = fire(*[lambda: household.refresh(client_id, refresh_token)] * 2)
    trial = _observed(answers)
    trial.live_tokens = household.tokens_live(client_id, answers)
    return trial


def code_race(household: Household, choices: dict, fire=at_once) -> Trial:
    """One code exchanged twice (by ``fire``); ``live_tokens``: of the pairs issued, how many work afterwards."""
    client_id = household.register()
    code, verifier = household.approved_code(client_id, choices)
    answers = fire(*[lambda: household.exchange(client_id, code, verifier)] * 2)
    trial = _observed(answers)
    trial.live_tokens = household.tokens_live(client_id, answers)
    return trial


def approval_race(household: Household, choices: dict, fire=at_once) -> tuple[Trial, str]:
    """The consent form's Allow sent twice (by ``fire``: at once is a double click); the trial and the client's id
    (to count its live connections)."""
    client_id = household.register()
    _verifier, challenge = pkce()
    path, fields = household.consent_form(client_id, challenge, choices)
    answers = fire(*[lambda: household.allow(path, fields)] * 2)
    trial = Trial(statuses=[answer.status_code for answer in answers])
    return trial, client_id
