#!/usr/bin/env bash
# Small stand-in for the upstream postgres image's entrypoint.
# First start with an empty $PGDATA: initdb as POSTGRES_USER with
# POSTGRES_PASSWORD, password (scram-sha-256) auth from any host, create
# POSTGRES_DB, run /docker-entrypoint-initdb.d/*.sql|*.sql.gz|*.sh against it.
# Like upstream, the init runs on a temporary socket-only server, so "database
# system is ready to accept connections" is logged twice on a first start
# (testcontainers' postgres module waits for exactly that).
set -Eeuo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi

: "${PGDATA:=/var/lib/postgresql/data}"
export PGDATA

# As root: fix ownership, then re-run this script as the postgres user.
if [ "$1" = 'postgres' ] && [ "$(id -u)" = '0' ]; then
	mkdir -p "$PGDATA" /var/run/postgresql
	find "$PGDATA" \! -user postgres -exec chown postgres:postgres '{}' +
	chmod 700 "$PGDATA"
	chown postgres:postgres /var/run/postgresql
	chmod 3777 /var/run/postgresql
	exec setpriv --reuid=postgres --regid=postgres --init-groups "${BASH_SOURCE[0]}" "$@"
fi

if [ "$1" = 'postgres' ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
	: "${POSTGRES_USER:=postgres}"
	: "${POSTGRES_DB:=$POSTGRES_USER}"
	: "${POSTGRES_HOST_AUTH_METHOD:=scram-sha-256}"
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$POSTGRES_HOST_AUTH_METHOD" != 'trust' ]; then
		echo 'error: database is uninitialized and POSTGRES_PASSWORD is not set' >&2
		echo '       (set it, or POSTGRES_HOST_AUTH_METHOD=trust to allow all connections without one)' >&2
		exit 1
	fi

	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of words, as upstream
	initdb --username="$POSTGRES_USER" --pwfile=<(printf '%s\n' "${POSTGRES_PASSWORD:-}") \
		--encoding=UTF8 --locale=C.UTF-8 --auth-local=trust --auth-host="$POSTGRES_HOST_AUTH_METHOD" \
		${POSTGRES_INITDB_ARGS:-}
	printf '\nhost all all all %s\n' "$POSTGRES_HOST_AUTH_METHOD" >> "$PGDATA/pg_hba.conf"
	printf "\nlisten_addresses = '*'\n" >> "$PGDATA/postgresql.conf"

	# Temporary server on the unix socket only, so nobody connects over TCP mid-init.
	pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start

	psql=(psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ "$POSTGRES_DB" != 'postgres' ]; then
		"${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<-'SQL'
			CREATE DATABASE :"db";
		SQL
	fi
	shopt -s nullglob
	# shellcheck disable=SC1090 # sources the user's init scripts
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
			*.sh)     echo "$0: running $f"; . "$f" ;;
			*.sql)    echo "$0: running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
			*.sql.gz) echo "$0: running $f"; gunzip -c "$f" | "${psql[@]}" --dbname "$POSTGRES_DB" ;;
			*)        echo "$0: ignoring $f" ;;
		esac
	done

	pg_ctl -D "$PGDATA" -m fast -w stop
	echo 'PostgreSQL init process complete; ready for start up.'
fi

exec "$@"
