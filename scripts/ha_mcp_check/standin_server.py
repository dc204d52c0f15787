"""STAND-IN, not justai-memory: a tiny OAuth + MCP server with the interface the real one promises.

It exists only so the Home Assistant driver (test_ha_flow.py) can be developed and checked when
the real server is not at hand. It mimics: the RFC 8414 and RFC 9728 documents, a Django-admin-like
login form (``/admin/login/?next=...``, csrf cookie + hidden field), a consent form at
``/oauth/authorize/`` (room, speaker, model_location, scope, hidden OAuth fields, an ``allow``
button), the token endpoint ``/oauth/token/`` (client secret in the body, PKCE when a challenge was
sent) and ``/mcp`` (bearer only) with one tool, memory_recall, that answers with the granted room.

Run it from the Home Assistant venv (it needs mcp, starlette, uvicorn):

    python standin_server.py --port 8765 --client-id ha --client-secret s3cret \
        --redirect-uri https://my.home-assistant.io/redirect/oauth
"""

import argparse
import base64
import hashlib
import html
import json
import logging
import secrets
import time
from urllib.parse import urlencode

import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

ROOMS = {"1": "Kitchen", "2": "Living room"}
PEOPLE = {"1": "Anna"}
SCOPES = ["memory:read", "memory:write"]


class State:
    def __init__(self, args):
        self.args = args
        self.sessions: set[str] = set()
        self.codes: dict[str, dict] = {}
        self.tokens: dict[str, dict] = {}
        self.refresh: dict[str, dict] = {}
        self.log: list[str] = []


def build_app(args) -> Starlette:
    st = State(args)
    mcp = FastMCP(
        "justai-memory (stand-in)",
        stateless_http=True,
        json_response=True,
        streamable_http_path="/mcp",
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    @mcp.tool(name="memory_recall", description="Stand-in recall: says which grant answered.")
    def memory_recall(query: str, ctx: Context, limit: int = 5) -> str:
        auth = ctx.request_context.request.headers.get("authorization", "")
        grant = st.tokens[auth.removeprefix("Bearer ")]
        return (
            f"stand-in recall for {query!r} in room {ROOMS[grant['room']]}, speaker {grant['speaker'] or 'unknown'}, "
            f"model {grant['model_location']}, scope {grant['scope']}"
        )

    @mcp.tool(name="memory_remember", description="Stand-in remember: keeps nothing, says what it got.")
    def memory_remember(content: str, ctx: Context, scope: str = "shared") -> str:
        return f"stand-in remembered {content!r} ({scope})"

    def origin(request: Request) -> str:
        return f"{request.url.scheme}://{request.url.netloc}"

    async def as_metadata(request: Request) -> Response:
        o = origin(request)
        return JSONResponse(
            {
                "issuer": o,
                "authorization_endpoint": f"{o}/oauth/authorize/",
                "token_endpoint": f"{o}/oauth/token/",
                "revocation_endpoint": f"{o}/oauth/revoke/",
                "scopes_supported": SCOPES,
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            }
        )

    async def pr_metadata(request: Request) -> Response:
        o = origin(request)
        return JSONResponse({"resource": f"{o}/mcp", "authorization_servers": [o], "scopes_supported": SCOPES})

    def logged_in(request: Request) -> bool:
        return request.cookies.get("sessionid") in st.sessions

    async def login(request: Request) -> Response:
        nxt = request.query_params.get("next", "/admin/")
        if request.method == "POST":
            form = await request.form()
            if form.get("csrfmiddlewaretoken") != request.cookies.get("csrftoken"):
                return Response("CSRF verification failed", status_code=403)
            if form.get("username") == args.admin_user and form.get("password") == args.admin_password:
                sid = secrets.token_hex(16)
                st.sessions.add(sid)
                resp = RedirectResponse(form.get("next") or nxt, status_code=302)
                resp.set_cookie("sessionid", sid, httponly=True)
                return resp
        csrf = request.cookies.get("csrftoken") or secrets.token_hex(16)
        page = (
            '<form action="" method="post" id="login-form">'
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">'
            '<input type="text" name="username"><input type="password" name="password">'
            f'<input type="hidden" name="next" value="{html.escape(nxt)}">'
            '<input type="submit" value="Log in"></form>'
        )
        resp = HTMLResponse(page)
        resp.set_cookie("csrftoken", csrf)
        return resp

    async def authorize(request: Request) -> Response:
        if not logged_in(request):
            nxt = request.url.path + ("?" + request.url.query if request.url.query else "")
            return RedirectResponse("/admin/login/?" + urlencode({"next": nxt}), status_code=302)
        if request.method == "GET":
            q = request.query_params
            if q.get("client_id") != args.client_id or q.get("redirect_uri") not in args.redirect_uri:
                return Response("unknown client or redirect_uri", status_code=400)
            hidden = "".join(
                f'<input type="hidden" name="{k}" value="{html.escape(q.get(k, ""))}">'
                for k in (
                    "client_id",
                    "redirect_uri",
                    "response_type",
                    "state",
                    "code_challenge",
                    "code_challenge_method",
                )
            )
            rooms = "".join(f'<option value="{k}">{v}</option>' for k, v in ROOMS.items())
            people = '<option value="">nobody in particular</option>' + "".join(
                f'<option value="{k}">{v}</option>' for k, v in PEOPLE.items()
            )
            csrf = request.cookies.get("csrftoken", "")
            page = (
                '<form method="post">'
                f'<input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">{hidden}'
                f'<select name="room">{rooms}</select><select name="speaker">{people}</select>'
                '<input type="radio" name="model_location" value="local" checked>'
                '<input type="radio" name="model_location" value="cloud">'
                f'<input type="hidden" name="scope" value="{html.escape(q.get("scope", " ".join(SCOPES)))}">'
                '<input type="submit" name="allow" value="Allow"><input type="submit" value="Deny"></form>'
            )
            return HTMLResponse(page)
        form = await request.form()
        if form.get("csrfmiddlewaretoken") != request.cookies.get("csrftoken"):
            return Response("CSRF verification failed", status_code=403)
        target = form["redirect_uri"]
        if "allow" not in form:
            return RedirectResponse(
                target + "?" + urlencode({"error": "access_denied", "state": form["state"]}), status_code=302
            )
        code = secrets.token_urlsafe(16)
        st.codes[code] = {
            "redirect_uri": target,
            "room": form["room"],
            "speaker": form.get("speaker") or None,
            "model_location": form["model_location"],
            "scope": form.get("scope", ""),
            "challenge": form.get("code_challenge") or None,
        }
        return RedirectResponse(target + "?" + urlencode({"code": code, "state": form["state"]}), status_code=302)

    def issue(grant: dict) -> dict:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        st.tokens[access] = grant
        st.refresh[refresh] = grant
        return {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": 3600,
            "refresh_token": refresh,
            "scope": grant["scope"],
        }

    async def token(request: Request) -> Response:
        form = await request.form()
        st.log.append(json.dumps(sorted(form.keys())))
        if form.get("client_id") != args.client_id or form.get("client_secret") != args.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if form.get("grant_type") == "refresh_token":
            grant = st.refresh.pop(form.get("refresh_token", ""), None)
            if grant is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            return JSONResponse(issue(grant))
        grant = st.codes.pop(form.get("code", ""), None)
        if grant is None or grant["redirect_uri"] != form.get("redirect_uri"):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        if grant["challenge"]:
            verifier = form.get("code_verifier", "")
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            if digest != grant["challenge"]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
        grant["issued"] = time.time()
        return JSONResponse(issue(grant))

    async def revoke(request: Request) -> Response:
        form = await request.form()
        if form.get("client_id") != args.client_id or form.get("client_secret") != args.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        # As revoking a grant in the admin: every token of the grant ends, the refresh tokens too.
        grant = st.tokens.get(form.get("token", "")) or st.refresh.get(form.get("token", ""))
        for table in (st.tokens, st.refresh):
            for key in [k for k, v in table.items() if v is grant]:
                del table[key]
        return Response(status_code=200)

    mcp_app = mcp.streamable_http_app()

    class GuardedMcp:
        async def __call__(self, scope, receive, send):
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization", b"").decode()
            if auth.removeprefix("Bearer ") not in st.tokens:
                meta = f"{scope['scheme']}://{headers[b'host'].decode()}/.well-known/oauth-protected-resource/mcp"
                resp = JSONResponse(
                    {"error": "invalid_token"},
                    status_code=401,
                    headers={"WWW-Authenticate": f'Bearer resource_metadata="{meta}"'},
                )
                await resp(scope, receive, send)
                return
            await mcp_app(scope, receive, send)

    app = Starlette(
        routes=[
            Route("/.well-known/oauth-authorization-server", as_metadata),
            Route("/.well-known/oauth-protected-resource/mcp", pr_metadata),
            Route("/admin/login/", login, methods=["GET", "POST"]),
            Route("/oauth/authorize/", authorize, methods=["GET", "POST"]),
            Route("/oauth/token/", token, methods=["POST"]),
            Route("/oauth/revoke/", revoke, methods=["POST"]),
            Route("/mcp", GuardedMcp(), methods=["GET", "POST", "DELETE"]),
        ],
        lifespan=lambda app: mcp.session_manager.run(),
    )
    return app


class RequestLog:
    """ASGI wrapper: one JSON line per request (method, path, query, headers, body) to a file."""

    def __init__(self, app, path: str):
        self.app, self.path = app, path

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks).decode("utf-8", "replace")
        status = {}

        async def replay():
            return {"type": "http.request", "body": body.encode(), "more_body": False}

        async def sending(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        await self.app(scope, replay, sending)
        line = {
            "method": scope["method"],
            "path": scope["path"],
            "query": scope["query_string"].decode(),
            "headers": {k.decode(): v.decode() for k, v in scope["headers"]},
            "body": body,
            "status": status.get("code"),
        }
        with open(self.path, "a") as out:
            out.write(json.dumps(line) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--client-secret", required=True)
    parser.add_argument("--redirect-uri", action="append", help="repeatable; default: My Home Assistant's")
    parser.add_argument("--admin-user", default="admin")
    parser.add_argument("--admin-password", default="admin-pw")
    parser.add_argument("--request-log", help="write every request received, one JSON line each, to this file")
    args = parser.parse_args()
    args.redirect_uri = args.redirect_uri or ["https://my.home-assistant.io/redirect/oauth"]
    logging.getLogger("mcp").setLevel(logging.WARNING)
    app = build_app(args)
    if args.request_log:
        app = RequestLog(app, args.request_log)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
