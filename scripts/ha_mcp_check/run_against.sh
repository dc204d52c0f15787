#!/usr/bin/env bash
# Run test_ha_flow.py against justai-memory served from a checkout (default: this one).
#
# Starts the service (the supervisor: embedded PostgreSQL, migrations, web) on a free loopback port
# with a data folder of its own, adds an admin, two rooms, a person, a memory in the kitchen and an
# OAuth client for Home Assistant's two redirect URIs, runs the Home Assistant check
# (README.md), then stops the service and keeps the data folder's log.
#
#   scripts/ha_mcp_check/run_against.sh [CHECKOUT]
#
# HA_PYTHON: the Home Assistant venv's python (default /work/havenv/venv/bin/python).
# SERVER_CMD: how to start the service in the checkout (default: its .venv python -m justai_memory.serving.supervisor;
#   not ./scripts/run, which would install requirements into a shared .venv).
# MEMORY_EMBEDDER: default hash (no model to load; this checks the wiring, not the meaning).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CHECKOUT=$(cd "${1:-$HERE/../..}" && pwd)
HA_PYTHON=${HA_PYTHON:-/work/havenv/venv/bin/python}
PY="$CHECKOUT/.venv/bin/python"
DATA=$(mktemp -d /tmp/ha-mcp-check.XXXXXX)
PORT=$("$HA_PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
PASSWORD=$("$HA_PYTHON" -c 'import secrets; print(secrets.token_urlsafe(12))')

export JUSTAI_DATA_DIR="$DATA" JUSTAI_HOST=127.0.0.1 JUSTAI_PORT="$PORT" WEB_WORKERS=1 Q_WORKERS=1
export JUSTAI_ADMIN_USER=admin JUSTAI_ADMIN_PASSWORD="$PASSWORD" DJANGO_SETTINGS_MODULE=justai_memory.settings
export MEMORY_EMBEDDER="${MEMORY_EMBEDDER:-hash}" PYTHONDONTWRITEBYTECODE=1
SERVER_CMD=${SERVER_CMD:-"$PY -m justai_memory.serving.supervisor"}

cd "$CHECKOUT"
echo "==> $CHECKOUT: $SERVER_CMD on 127.0.0.1:$PORT, data $DATA"
setsid $SERVER_CMD >"$DATA/server.log" 2>&1 &
SERVER=$!
stop() {
  kill -TERM "$SERVER" 2>/dev/null || true
  for _ in $(seq 1 60); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.5; done
  kill -0 "$SERVER" 2>/dev/null && kill -KILL -- -"$SERVER" 2>/dev/null || true
  echo "==> service stopped; its log: $DATA/server.log"
}
trap stop EXIT

for _ in $(seq 1 360); do
  if ! kill -0 "$SERVER" 2>/dev/null; then tail -40 "$DATA/server.log"; echo "the service exited" >&2; exit 1; fi
  code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/.well-known/oauth-authorization-server" || true)
  [ "$code" = 200 ] && break
  sleep 0.5
done
[ "$code" = 200 ] || { tail -40 "$DATA/server.log"; echo "no metadata after 180 s (last: $code)" >&2; exit 1; }

manage() { "$PY" manage.py "$@"; }
manage add_room Kitchen
manage add_room "Living room"
manage add_person Anna
manage shell -c "
from people.models import Room
from memories.services.remember import memory_remember
kitchen = Room.objects.get(name='Kitchen')
memory_remember(content='The spare key for the cellar is in the blue tin in the kitchen drawer.', speaker=None,
                room=kitchen, scope='room', source_ref='ha-check')
living = Room.objects.get(name='Living room')
memory_remember(content='The spare key for the garage is under the living room plant.', speaker=None,
                room=living, scope='room', source_ref='ha-check')
print('memories stored')
"
# Both redirect URIs Home Assistant uses: with My Home Assistant, and without it (test_ha_flow.py's LOCAL_HA).
CLIENT=$(manage oauth_client --name "Home Assistant" --redirect-uri https://my.home-assistant.io/redirect/oauth \
  --redirect-uri http://homeassistant.local:8123/auth/external/callback 2>/dev/null)
CLIENT_ID=$(sed -n 's/^client_id: //p' <<<"$CLIENT")
CLIENT_SECRET=$(sed -n 's/^client_secret: //p' <<<"$CLIENT")
[ -n "$CLIENT_ID" ] && [ -n "$CLIENT_SECRET" ] || { echo "oauth_client printed: $CLIENT" >&2; exit 1; }

cd "$HERE"
HA_MCP_URL="http://127.0.0.1:$PORT/mcp" HA_MCP_CLIENT_ID="$CLIENT_ID" HA_MCP_CLIENT_SECRET="$CLIENT_SECRET" \
  HA_MCP_ADMIN_USER=admin HA_MCP_ADMIN_PASSWORD="$PASSWORD" HA_MCP_ROOM="${HA_MCP_ROOM:-Kitchen}" \
  HA_MCP_QUERY="${HA_MCP_QUERY:-Where is the spare key?}" HA_MCP_EXPECT="blue tin" HA_MCP_REJECT="garage" \
  HA_MCP_REVOKE_ADMIN="${HA_MCP_REVOKE_ADMIN-/admin/connections/connection/}" \
  HA_MCP_CONSENT="${HA_MCP_CONSENT-${HA_MCP_REMEMBER:+access=memory:read memory:write}}" \
  "$HA_PYTHON" -m pytest -s -p no:cacheprovider test_ha_flow.py
