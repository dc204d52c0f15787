"""The user's browser in Home Assistant's OAuth step, played with httpx: admin login, consent, redirect.

It follows redirects by hand so it can stop at Home Assistant's redirect URI (which it never
fetches: that is Home Assistant's side) and read ``code`` and ``state`` from it. Forms are read
from the HTML the server sends, so the consent page's own hidden fields travel back unchanged.
"""

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx

MAX_STEPS = 12


@dataclass
class Form:
    action: str
    method: str
    inputs: list[dict] = field(default_factory=list)  # name, type, value, checked
    selects: dict[str, list[tuple[str, str, bool]]] = field(default_factory=dict)  # name -> (value, label, selected)
    buttons: list[dict] = field(default_factory=list)  # name, value (submit buttons only)

    def names(self) -> set[str]:
        return {i["name"] for i in self.inputs} | set(self.selects) | {b["name"] for b in self.buttons}

    def values(self, name: str) -> list[str]:
        """Every value the form's inputs of this name carry (e.g. the admin changelist's row checkboxes)."""
        return [i["value"] for i in self.inputs if i["name"] == name]

    def defaults(self) -> dict[str, str]:
        """What a browser would send without the user touching anything (submit buttons left out)."""
        data: dict[str, str] = {}
        for i in self.inputs:
            if i["type"] in ("radio", "checkbox"):
                if i["checked"]:
                    data[i["name"]] = i["value"] or "on"
            elif i["type"] not in ("submit", "button", "image", "reset"):
                data[i["name"]] = i["value"]
        for name, options in self.selects.items():
            chosen = [v for v, _, sel in options if sel] or [v for v, _, _ in options[:1]]
            if chosen:
                data[name] = chosen[0]
        return data


class _FormParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self._select: str | None = None
        self._option: dict | None = None
        self._text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = {k: (v if v is not None else "") for k, v in attrs}
        if tag in ("script", "style"):
            self._skip += 1
        if tag == "form":
            self.forms.append(Form(action=a.get("action", ""), method=a.get("method", "get").lower()))
        if not self.forms or "name" not in a:
            if tag == "option" and self._select is not None:
                self._option = {"value": a.get("value"), "selected": "selected" in a, "label": ""}
            return
        form = self.forms[-1]
        if tag == "input":
            kind = a.get("type", "text").lower()
            if kind == "submit":
                form.buttons.append({"name": a["name"], "value": a.get("value", "")})
            else:
                form.inputs.append(
                    {"name": a["name"], "type": kind, "value": a.get("value", ""), "checked": "checked" in a}
                )
        elif tag == "button" and a.get("type", "submit").lower() == "submit":
            form.buttons.append({"name": a["name"], "value": a.get("value", "")})
        elif tag == "select":
            self._select = a["name"]
            form.selects[a["name"]] = []
        elif tag == "textarea":
            form.inputs.append({"name": a["name"], "type": "textarea", "value": "", "checked": False})

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1
        if tag == "option" and self._option is not None and self._select is not None:
            label = self._option["label"].strip()
            value = self._option["value"] if self._option["value"] is not None else label
            self.forms[-1].selects[self._select].append((value, label, self._option["selected"]))
            self._option = None
        elif tag == "select":
            self._select = None

    def handle_data(self, data):
        if self._option is not None:
            self._option["label"] += data
        if not self._skip:
            self._text.append(data)

    def text(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self._text)).strip()


def parse(page: str) -> tuple[list[Form], str]:
    parser = _FormParser()
    parser.feed(page)
    return parser.forms, parser.text()


@dataclass
class Consent:
    """What the user picks on the consent page (room by id or by its label; speaker None = nobody)."""

    room: str | None = None
    speaker: str | None = None
    model_location: str = "local"
    scope: str | None = None  # None: leave what the page proposes
    allow: bool = True  # False: the other submit button (Deny)
    fields: dict[str, str] = field(default_factory=dict)  # any other field of the page, e.g. access


@dataclass
class BrowserResult:
    code: str | None
    state: str | None
    error: str | None
    redirect: str
    screens: list[str]  # one line per page the user saw: URL and its visible text


def _pick(options: list[tuple[str, str, bool]], wanted: str | None, field_name: str) -> str:
    if wanted is None:
        real = [v for v, _, _ in options if v]
        if not real:
            raise AssertionError(f"the consent form's {field_name} has no choice: {options}")
        return real[0]
    for value, label, _ in options:
        if wanted in (value, label):
            return value
    raise AssertionError(f"the consent form's {field_name} has no option {wanted!r}: {options}")


async def authorize(
    client: httpx.AsyncClient,
    authorize_url: str,
    redirect_uri: str,
    username: str,
    password: str,
    consent: Consent,
    log=print,
) -> BrowserResult:
    """Open authorize_url, log in to the admin when asked, approve the consent form; stop at redirect_uri."""
    screens: list[str] = []
    method, url, data = "GET", authorize_url, None
    logged_in = consented = False
    for _ in range(MAX_STEPS):
        if method == "POST":
            resp = await client.post(url, data=data, headers={"Referer": url, "Origin": _origin(url)})
        else:
            resp = await client.get(url)
        log(f"  browser {method} {_short(url)} -> {resp.status_code}")
        if resp.is_redirect:
            location = urljoin(str(resp.url), resp.headers["location"])
            if location.startswith(redirect_uri):
                query = parse_qs(urlsplit(location).query)
                one = {k: v[0] for k, v in query.items()}
                return BrowserResult(one.get("code"), one.get("state"), one.get("error"), location, screens)
            method, url, data = "GET", location, None
            continue
        if resp.status_code != 200:
            raise AssertionError(f"{method} {url} answered {resp.status_code}: {resp.text[:800]}")
        forms, text = parse(resp.text)
        screens.append(f"{_short(str(resp.url))}: {text[:600]}")
        login = next((f for f in forms if "password" in f.names()), None)
        grant = next((f for f in forms if "room" in f.names()), None)
        if login is not None and not logged_in:
            data = login.defaults() | {"username": username, "password": password}
            method, url, logged_in = "POST", urljoin(str(resp.url), login.action), True
            continue
        if grant is not None and not consented:
            data = grant.defaults()
            data["room"] = (
                _pick(grant.selects["room"], consent.room, "room") if "room" in grant.selects else consent.room
            )
            if consent.speaker is None:
                data["speaker"] = ""
            elif "speaker" in grant.selects:
                data["speaker"] = _pick(grant.selects["speaker"], consent.speaker, "speaker")
            else:
                data["speaker"] = consent.speaker
            data["model_location"] = consent.model_location
            if consent.scope is not None:
                data["scope"] = consent.scope
            data.update(consent.fields)
            allow = next((b for b in grant.buttons if b["name"] == "allow"), None)
            if allow is None:
                raise AssertionError(f"the consent form has no submit button named allow: {grant.buttons}")
            if consent.allow:
                data[allow["name"]] = allow["value"]
            else:  # the Deny button: a submit without a name adds nothing to the form data
                data.pop(allow["name"], None)
                deny = [b for b in grant.buttons if b["name"] != "allow"]
                if deny:
                    data[deny[0]["name"]] = deny[0]["value"]
            log(f"  consent form fields sent: { {k: v for k, v in data.items() if k != 'csrfmiddlewaretoken'} }")
            method, url, consented = "POST", urljoin(str(resp.url), grant.action), True
            continue
        raise AssertionError(f"page without a form to go on with at {resp.url}: {text[:800]}")
    raise AssertionError(f"no redirect to {redirect_uri} after {MAX_STEPS} pages")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _short(url: str) -> str:
    return url if len(url) <= 140 else url[:137] + "..."


async def admin_action(
    client: httpx.AsyncClient, changelist_url: str, username: str, password: str, action_label: str, log=print
) -> str:
    """Run a Django admin changelist action on every row shown (logging in first when asked); the page after it."""
    resp = await client.get(changelist_url)
    for _ in range(MAX_STEPS):
        if resp.is_redirect:
            resp = await client.get(urljoin(str(resp.url), resp.headers["location"]))
            continue
        forms, text = parse(resp.text)
        login = next((f for f in forms if "password" in f.names()), None)
        if login is None:
            break
        data = login.defaults() | {"username": username, "password": password}
        url = urljoin(str(resp.url), login.action)
        resp = await client.post(url, data=data, headers={"Referer": url, "Origin": _origin(url)})
    assert resp.status_code == 200, f"{changelist_url}: {resp.status_code} {resp.text[:500]}"
    forms, text = parse(resp.text)
    changelist = next((f for f in forms if "action" in f.selects), None)
    assert changelist is not None, f"no action form at {changelist_url}: {text[:500]}"
    action = next((v for v, label, _ in changelist.selects["action"] if action_label in label), None)
    assert action, f"no action {action_label!r}: {changelist.selects['action']}"
    rows = changelist.values("_selected_action")
    data = changelist.defaults() | {"action": action, "_selected_action": rows, "index": "0"}
    url = urljoin(str(resp.url), changelist.action)
    done = await client.post(url, data=data, headers={"Referer": url, "Origin": _origin(url)}, follow_redirects=True)
    log(f"  admin: {action_label!r} on {len(rows)} rows -> {done.status_code}")
    return parse(done.text)[1]
