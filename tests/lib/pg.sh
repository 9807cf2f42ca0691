#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A scratch PostgreSQL cluster for the store's tests: initdb in a temporary
# directory as the unprivileged user postgres (when run as root), listening
# only on a Unix socket inside that directory, trust authentication for
# local connections except the role mcpsd, which needs its password (the
# tests check that a password never reaches a log). Every step is bounded
# in time.
#
#   tests/lib/pg.sh start DIR     creates and starts a cluster in DIR (new
#                                 or empty); prints its URL (also DIR/url)
#   tests/lib/pg.sh stop DIR      stops it (keeps the data)
#   tests/lib/pg.sh restart DIR   stops and starts it again
#   tests/lib/pg.sh destroy DIR   stops it and removes DIR
#   tests/lib/pg.sh run CMD...    a cluster in a new directory for CMD, which
#                                 gets MCPSD_TEST_PG_URL (database postgres,
#                                 user postgres), MCPSD_TEST_PG_PW_URL (user
#                                 mcpsd with its password) and
#                                 MCPSD_TEST_PG_CTL (this script) and
#                                 MCPSD_TEST_PG_DIR (the cluster's DIR, for
#                                 stop, start, restart); removed
#                                 afterwards. When PostgreSQL cannot start,
#                                 prints a TAP skip with the reason and
#                                 exits 0.
set -euo pipefail

SELF=$(readlink -f "$0")
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
PW=${MCPSD_TEST_PG_PASSWORD:-store-test-pw-7f3a}

die() { echo "pg.sh: $*" >&2; exit 1; }

as_pg() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

url_of() { # DIR [USER [PASSWORD]]
	local u=${2:-postgres}
	echo "postgresql://$u${3:+:$3}@/postgres?host=$1/sock&port=5432"
}

start() {
	local dir=$1
	[ -x "$PGBIN/initdb" ] || die "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin; apt-get install postgresql)"
	mkdir -p "$dir"
	chmod 755 "$dir"
	dir=$(readlink -f "$dir")
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		mkdir -p "$dir/data" "$dir/sock"
		[ "$(id -u)" -ne 0 ] || chown postgres: "$dir" "$dir/data" "$dir/sock"
		chmod 700 "$dir/data"
		timeout 120 bash -c "$(declare -f as_pg); as_pg '$PGBIN/initdb' -D '$dir/data' -U postgres --auth-local=trust --auth-host=reject -E UTF8 --locale=C.UTF-8" \
			>"$dir/initdb.log" 2>&1 || { tail -5 "$dir/initdb.log" >&2; die "initdb failed (log: $dir/initdb.log)"; }
		# The role mcpsd authenticates with its password, everyone else is trusted.
		{ echo "local all mcpsd scram-sha-256"; echo "local all all trust"; } >"$dir/data/pg_hba.conf"
	fi
	timeout 60 bash -c "$(declare -f as_pg); as_pg '$PGBIN/pg_ctl' -D '$dir/data' -l '$dir/server.log' -w -t 45 \
		-o \"-k $dir/sock -c listen_addresses='' -p 5432 -c fsync=off -c max_connections=40\" start" >/dev/null ||
		{ tail -5 "$dir/server.log" >&2 || true; die "the server did not start (log: $dir/server.log)"; }
	if ! as_pg "$PGBIN/psql" -qAt -h "$dir/sock" -p 5432 -U postgres -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname = 'mcpsd'" | grep -q 1; then
		as_pg "$PGBIN/psql" -q -h "$dir/sock" -p 5432 -U postgres -d postgres \
			-c "CREATE ROLE mcpsd LOGIN CREATEDB PASSWORD '$PW'" >/dev/null
	fi
	url_of "$dir" >"$dir/url"
	cat "$dir/url"
}

stop() {
	local dir
	dir=$(readlink -f "$1")
	[ -f "$dir/data/postmaster.pid" ] || return 0
	timeout 60 bash -c "$(declare -f as_pg); as_pg '$PGBIN/pg_ctl' -D '$dir/data' -m fast -w -t 45 stop" >/dev/null 2>&1 || true
}

case ${1:-} in
start) start "${2:?DIR}" ;;
stop) stop "${2:?DIR}" ;;
restart) stop "${2:?DIR}"; start "$2" >/dev/null ;;
destroy) stop "${2:?DIR}"; rm -rf "$2" ;;
run)
	shift
	[ $# -gt 0 ] || die "run needs a command"
	dir=$(mktemp -d /tmp/mcpsd-pg-XXXXXX)
	chmod 755 "$dir"
	trap '"$SELF" destroy "$dir"' EXIT
	if ! why=$(start "$dir" 2>&1 >/dev/null); then
		echo "1..0 # SKIP PostgreSQL cannot be started here: $(echo "$why" | tail -1)"
		exit 0
	fi
	MCPSD_TEST_PG_URL=$(url_of "$dir") MCPSD_TEST_PG_PW_URL=$(url_of "$dir" mcpsd "$PW") \
		MCPSD_TEST_PG_CTL="$SELF" MCPSD_TEST_PG_DIR="$dir" "$@"
	;;
*) sed -n '3,24p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
