#!/usr/bin/env bash
# A throwaway PostgreSQL server for the store tests.
#
#   eval "$(.ci/postgres.sh start)"   # starts a server, prints: export CALLBOUND_TEST_POSTGRES=...
#   .ci/postgres.sh stop              # stops it and removes its folder
#
# Needs the server binaries (Debian/Ubuntu: apt-get install -y postgresql). initdb and pg_ctl refuse to
# run as root, so as root they run as the "postgres" user. Port: CALLBOUND_PG_PORT (default 55432);
# folder: CALLBOUND_PG_DIR (default $TMPDIR/callbound-pg-$PORT).
set -euo pipefail

PORT="${CALLBOUND_PG_PORT:-55432}"
DIR="${CALLBOUND_PG_DIR:-${TMPDIR:-/tmp}/callbound-pg-${PORT}}"
DSN="postgresql://postgres@127.0.0.1:${PORT}/postgres"

pgbin() {
    if [ -n "${PGBIN:-}" ]; then echo "$PGBIN"; return; fi
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir; return
    fi
    local found
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
    if [ -z "$found" ]; then
        echo "postgres.sh: no PostgreSQL server binaries found; install them (apt-get install -y postgresql) or set PGBIN" >&2
        exit 2
    fi
    echo "$found"
}

as_owner() {
    if [ "$(id -u)" = "0" ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start() {
    local bin
    bin="$(pgbin)"
    if [ -f "$DIR/data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
        echo "export CALLBOUND_TEST_POSTGRES=$DSN"
        return
    fi
    rm -rf "$DIR"
    mkdir -p "$DIR"
    if [ "$(id -u)" = "0" ]; then chown postgres "$DIR"; fi
    as_owner "$bin/initdb" -D "$DIR/data" -A trust -U postgres >"$DIR/initdb.log" 2>&1 || {
        cat "$DIR/initdb.log" >&2; exit 1; }
    as_owner "$bin/pg_ctl" -D "$DIR/data" -w -t 60 \
        -o "-p $PORT -k $DIR -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200" \
        -l "$DIR/server.log" start >/dev/null || { cat "$DIR/server.log" >&2; exit 1; }
    echo "export CALLBOUND_TEST_POSTGRES=$DSN"
}

stop() {
    if [ -d "$DIR/data" ]; then
        local bin
        bin="$(pgbin)"
        as_owner "$bin/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$DIR"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
