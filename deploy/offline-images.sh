#!/usr/bin/env bash
# FOR OFFLINE MACHINES ONLY: machines that run Docker but reach no image
# registry (Parley's development and CI machines). On a machine that can pull
# images, do not run this: `docker compose up --build` pulls the real ones.
#
# It builds, on this machine, stand-ins for the images docker-compose.yml
# and deploy/docker/Dockerfile name, under exactly those names, so that
# Compose and the Dockerfile run unchanged:
#
#   debian:bookworm          a Debian base made with debootstrap from the
#                            Debian mirror apt uses (the base of the others)
#   postgres:15              Debian's postgresql-15, with an entrypoint that
#                            honours POSTGRES_USER, POSTGRES_PASSWORD,
#                            POSTGRES_DB, POSTGRES_INITDB_ARGS,
#                            POSTGRES_HOST_AUTH_METHOD, PGDATA and
#                            /docker-entrypoint-initdb.d as the official
#                            image does; pg_isready for the healthcheck
#   redis:7-alpine           Debian's redis-server (Debian, not Alpine: only
#                            the name matches), protected mode off and
#                            running as redis, as the official image does
#   nats:<v>-alpine          FROM scratch: the static nats-server of bin/
#                            (make tools, CGO_ENABLED=0) and a static
#                            busybox for the healthcheck's wget
#   gcr.io/distroless/static-debian12:nonroot
#                            FROM scratch: passwd/group with nonroot
#                            (65532), CA certificates, tzdata, /tmp
#   golang:<v>-bookworm      the Debian base with this machine's Go
#                            toolchain (/usr/local/go) and its local CAs
#                            (/usr/local/share/ca-certificates); its version
#                            must match the Dockerfile's GO_VERSION
#
# Idempotent: an image that exists is skipped (FORCE=1 rebuilds them all).
# Needs root (debootstrap) and a running dockerd. Usage:
#   NATS_SERVER=bin/nats-server-v2.15.2 deploy/offline-images.sh
# (make offline-images builds the binary and passes it.)
set -euo pipefail
cd "$(dirname "$0")/.."

FORCE=${FORCE:-}
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
NATS_SERVER=${NATS_SERVER:?set NATS_SERVER to a static nats-server binary (make offline-images does)}
GOROOT_DIR=${GOROOT_DIR:-$(go env GOROOT)}

log() { printf '== %s\n' "$*"; }
have() { [ -z "$FORCE" ] && docker image inspect "$1" >/dev/null 2>&1; }

# The names, read from the files that use them.
compose_image() {
	sed -n "s/^[[:space:]]*image:[[:space:]]*\($1:[^[:space:]]*\).*/\1/p" docker-compose.yml | head -n 1
}
POSTGRES_IMAGE=$(compose_image postgres)
REDIS_IMAGE=$(compose_image redis)
NATS_IMAGE=$(compose_image nats)
GO_VERSION=$(sed -n 's/^ARG GO_VERSION=\(.*\)$/\1/p' deploy/docker/Dockerfile)
GO_IMAGE=golang:${GO_VERSION}-bookworm
RUNTIME_IMAGE=$(sed -n 's/^FROM \(gcr.io\/distroless\/[^ ]*\) AS runtime$/\1/p' deploy/docker/Dockerfile)
BASE_IMAGE=debian:bookworm
for v in POSTGRES_IMAGE REDIS_IMAGE NATS_IMAGE GO_VERSION RUNTIME_IMAGE; do
	[ -n "${!v}" ] || { echo "could not read $v from docker-compose.yml / deploy/docker/Dockerfile" >&2; exit 1; }
done

# The nats-server binary must be the version the compose file names, and
# static (it runs in a scratch image).
nats_version=$("$NATS_SERVER" --version | sed -n 's/^nats-server: v\(.*\)$/\1/p')
if [ "${NATS_IMAGE#nats:}" != "${nats_version}-alpine" ]; then
	echo "$NATS_SERVER is v$nats_version but docker-compose.yml names $NATS_IMAGE" >&2
	exit 1
fi
if ! file -b "$NATS_SERVER" | grep -q 'statically linked'; then
	echo "$NATS_SERVER is not statically linked (build it with CGO_ENABLED=0: make tools)" >&2
	exit 1
fi
host_go=$("$GOROOT_DIR/bin/go" env GOVERSION)
case "$host_go" in
go"$GO_VERSION" | go"$GO_VERSION".*) ;;
*)
	echo "this machine's Go is $host_go; deploy/docker/Dockerfile wants $GO_VERSION" >&2
	exit 1
	;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# build NAME: docker build of the Dockerfile on stdin in $work/ctx.
build() {
	log "building $1"
	docker build -q -t "$1" -f - "$work/ctx" >/dev/null
}
fresh_ctx() { rm -rf "$work/ctx" && mkdir -p "$work/ctx"; }

if have "$BASE_IMAGE"; then
	log "$BASE_IMAGE exists"
else
	command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
	log "debootstrap bookworm from $DEBIAN_MIRROR (a few minutes)"
	debootstrap --variant=minbase bookworm "$work/rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
	printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
		"$DEBIAN_MIRROR" "$DEBIAN_MIRROR" >"$work/rootfs/etc/apt/sources.list"
	# As Debian's own images: no recommends, no docs, clean apt lists.
	printf 'APT::Install-Recommends "false";\n' >"$work/rootfs/etc/apt/apt.conf.d/90parley-offline"
	rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin
	tar -C "$work/rootfs" -c . | docker import -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$BASE_IMAGE" >/dev/null
	rm -rf "$work/rootfs"
fi

if have "$POSTGRES_IMAGE"; then
	log "$POSTGRES_IMAGE exists"
else
	fresh_ctx
	cp deploy/offline/postgres-entrypoint.sh "$work/ctx/docker-entrypoint.sh"
	pg_major=${POSTGRES_IMAGE#postgres:}
	pg_major=${pg_major%%[.-]*}
	build "$POSTGRES_IMAGE" <<EOF
FROM $BASE_IMAGE
# No cluster at install: the entrypoint makes one in PGDATA.
RUN mkdir -p /etc/postgresql-common/createcluster.d \\
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/parley-offline.conf \\
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-$pg_major >/dev/null \\
 && rm -rf /var/lib/apt/lists/* \\
 && mkdir -p /var/run/postgresql /docker-entrypoint-initdb.d && chown postgres:postgres /var/run/postgresql
ENV PATH=/usr/lib/postgresql/$pg_major/bin:\$PATH PGDATA=/var/lib/postgresql/data
COPY docker-entrypoint.sh /usr/local/bin/
VOLUME /var/lib/postgresql/data
ENTRYPOINT ["docker-entrypoint.sh"]
STOPSIGNAL SIGINT
EXPOSE 5432
CMD ["postgres"]
EOF
fi

if have "$REDIS_IMAGE"; then
	log "$REDIS_IMAGE exists"
else
	fresh_ctx
	cp deploy/offline/redis-entrypoint.sh "$work/ctx/docker-entrypoint.sh"
	build "$REDIS_IMAGE" <<EOF
FROM $BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server redis-tools >/dev/null \\
 && rm -rf /var/lib/apt/lists/* && mkdir -p /data && chown redis:redis /data
COPY docker-entrypoint.sh /usr/local/bin/
VOLUME /data
WORKDIR /data
ENTRYPOINT ["docker-entrypoint.sh"]
EXPOSE 6379
CMD ["redis-server"]
EOF
fi

if have "$NATS_IMAGE"; then
	log "$NATS_IMAGE exists"
else
	fresh_ctx
	cp "$NATS_SERVER" "$work/ctx/nats-server"
	# The official image's default configuration (compose mounts its own).
	printf 'port: 4222\nmonitor_port: 8222\n' >"$work/ctx/nats-server.conf"
	build "$NATS_IMAGE" <<EOF
FROM $BASE_IMAGE AS busybox
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null \\
 && mkdir -p /out/bin /out/tmp && chmod 1777 /out/tmp && cp /bin/busybox /out/bin/ \\
 && for t in sh wget; do ln -s busybox /out/bin/\$t; done

FROM scratch
COPY --from=busybox /out/ /
COPY nats-server /usr/local/bin/nats-server
COPY nats-server.conf /etc/nats/nats-server.conf
ENV PATH=/usr/local/bin:/bin
EXPOSE 4222 6222 8222
CMD ["nats-server", "--config", "/etc/nats/nats-server.conf"]
EOF
fi

if have "$RUNTIME_IMAGE"; then
	log "$RUNTIME_IMAGE exists"
else
	fresh_ctx
	build "$RUNTIME_IMAGE" <<EOF
FROM $BASE_IMAGE AS files
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates tzdata >/dev/null \\
 && mkdir -p /out/etc/ssl/certs /out/usr/share /out/tmp /out/home/nonroot \\
 && chmod 1777 /out/tmp && chown 65532:65532 /out/home/nonroot \\
 && cp /etc/ssl/certs/ca-certificates.crt /out/etc/ssl/certs/ \\
 && cp -a /usr/share/zoneinfo /out/usr/share/ \\
 && cp /etc/os-release /out/etc/ \\
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' > /out/etc/passwd \\
 && printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' > /out/etc/group

FROM scratch
COPY --from=files /out/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
EOF
fi

if have "$GO_IMAGE"; then
	log "$GO_IMAGE exists"
else
	fresh_ctx
	cp -a "$GOROOT_DIR" "$work/ctx/go"
	# This machine's own CAs (a TLS-inspecting egress proxy, for one):
	# the build downloads modules from the Go module proxy as the host does.
	mkdir -p "$work/ctx/local-ca"
	cp /usr/local/share/ca-certificates/*.crt "$work/ctx/local-ca/" 2>/dev/null || true
	build "$GO_IMAGE" <<EOF
FROM $BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates git >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
COPY local-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY go /usr/local/go
ENV GOLANG_VERSION=${host_go#go} GOTOOLCHAIN=local GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /go
EOF
fi

log "stand-in images ready: $BASE_IMAGE $POSTGRES_IMAGE $REDIS_IMAGE $NATS_IMAGE $RUNTIME_IMAGE $GO_IMAGE"
