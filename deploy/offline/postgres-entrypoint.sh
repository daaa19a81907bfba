#!/bin/bash
# The offline stand-in of the postgres image's entrypoint (deploy/offline-images.sh):
# the environment variables docker-compose.yml relies on behave as in the
# official image. On an empty PGDATA: initdb with POSTGRES_USER as the
# superuser and POSTGRES_PASSWORD as its password, POSTGRES_DB created,
# /docker-entrypoint-initdb.d/*.sh|*.sql run, TCP connections from anywhere
# authenticated with POSTGRES_HOST_AUTH_METHOD (scram-sha-256). Then postgres
# listening on every address, as the postgres user.
set -Eeo pipefail

if [ "${1:0:1}" = '-' ]; then
	set -- postgres "$@"
fi
if [ "$1" != postgres ]; then
	exec "$@"
fi

: "${PGDATA:=/var/lib/postgresql/data}"
: "${POSTGRES_USER:=postgres}"
: "${POSTGRES_DB:=$POSTGRES_USER}"
export PGDATA

if [ "$(id -u)" = 0 ]; then
	mkdir -p "$PGDATA"
	chown -R postgres:postgres "$PGDATA" /var/run/postgresql
	chmod 700 "$PGDATA"
	exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
	auth=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
	if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$auth" != trust ]; then
		echo 'Error: Database is uninitialized and superuser password is not specified.' >&2
		echo '       Set POSTGRES_PASSWORD (or POSTGRES_HOST_AUTH_METHOD=trust).' >&2
		exit 1
	fi
	pwfile=$(mktemp)
	printf '%s\n' "${POSTGRES_PASSWORD:-}" >"$pwfile"
	# shellcheck disable=SC2086 # POSTGRES_INITDB_ARGS is a list of flags
	initdb --username="$POSTGRES_USER" --pwfile="$pwfile" --auth-local=trust ${POSTGRES_INITDB_ARGS:-}
	rm -f "$pwfile"
	printf '\nhost all all all %s\n' "$auth" >>"$PGDATA/pg_hba.conf"

	# A temporary server on a private socket and no TCP: the healthcheck
	# (pg_isready on the default socket) stays red until the real one runs.
	sock=$(mktemp -d)
	pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k $sock" -w start >/dev/null
	psql=(psql -v ON_ERROR_STOP=1 -h "$sock" --username "$POSTGRES_USER" --no-password --no-psqlrc)
	if [ "$POSTGRES_DB" != postgres ]; then
		"${psql[@]}" --dbname postgres --set db="$POSTGRES_DB" <<-'SQL'
			CREATE DATABASE :"db";
		SQL
	fi
	for f in /docker-entrypoint-initdb.d/*; do
		case "$f" in
		*.sh) echo "running $f"; PGHOST=$sock . "$f" ;;
		*.sql) echo "running $f"; "${psql[@]}" --dbname "$POSTGRES_DB" -f "$f" ;;
		*) ;;
		esac
	done
	pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
	rm -rf "$sock"
	echo 'PostgreSQL init process complete; ready for start up.'
fi

shift
exec postgres -c listen_addresses='*' "$@"
