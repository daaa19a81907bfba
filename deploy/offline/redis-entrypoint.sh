#!/bin/sh
# The offline stand-in of the redis image's entrypoint (deploy/offline-images.sh):
# as the official image, arguments starting with '-' or a .conf file go to
# redis-server, which runs as the redis user in /data with protected mode off
# (the official image builds it so; without it, a server with no password
# refuses every client that is not on loopback, that is every container).
set -e

case "$1" in
-* | *.conf) set -- redis-server "$@" ;;
esac

if [ "$1" = redis-server ]; then
	shift
	conf=
	case "$1" in
	*.conf) conf=$1; shift ;;
	esac
	# protected-mode first, so that the caller's arguments can still set it.
	set -- redis-server $conf --protected-mode no "$@"
	if [ "$(id -u)" = 0 ]; then
		chown -R redis:redis /data 2>/dev/null || true
		exec setpriv --reuid=redis --regid=redis --init-groups "$@"
	fi
fi
exec "$@"
