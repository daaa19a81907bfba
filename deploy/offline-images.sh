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
# An image is rebuilt only when what it is made of changed: each carries
# the hash of its inputs (its Dockerfile, the files it copies, its base
# image) as a label, and one with the same hash is kept (FORCE=1 rebuilds
# them all). The five images on top of the Debian base build side by side.
# Needs root (debootstrap) and a running dockerd. Usage:
#   NATS_SERVER=bin/nats-server-v2.15.2 deploy/offline-images.sh
# (make offline-images builds the binary and passes it.) The Debian mirror
# is the one this machine's apt uses (/etc/apt/sources.list and
# /etc/apt/sources.list.d); DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR
# override it.
set -euo pipefail
cd "$(dirname "$0")/.."

FORCE=${FORCE:-}
NATS_SERVER=${NATS_SERVER:?set NATS_SERVER to a static nats-server binary (make offline-images does)}
GOROOT_DIR=${GOROOT_DIR:-$(go env GOROOT)}
SUITE=bookworm
INPUTS_LABEL=org.parley.offline-inputs

log() { printf '== %s\n' "$*"; }

# apt_uri SUITE: the URI of the first enabled deb source of this machine's
# apt configuration that serves SUITE, one-line (.list) or deb822 (.sources).
apt_uri() {
	local uris
	uris=$(
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -r "$f" ] || continue
			# deb [options] URI SUITE COMPONENTS...
			awk -v s="$1" '$1 == "deb" {
				i = 2
				if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
				if ($(i + 1) == s) print $i
			}' "$f"
		done
		for f in /etc/apt/sources.list.d/*.sources; do
			[ -r "$f" ] || continue
			awk -v s="$1" '
				function flush() { if (deb && enabled && has && uri != "") print uri; deb = 0; enabled = 1; has = 0; uri = "" }
				BEGIN { enabled = 1 }
				/^[[:space:]]*$/ { flush(); next }
				/^[[:space:]]*#/ { next }
				tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
				tolower($1) == "uris:" { uri = $2 }
				tolower($1) == "suites:" { for (i = 2; i <= NF; i++) if ($i == s) has = 1 }
				tolower($1) == "enabled:" { enabled = tolower($2) != "no" }
				END { flush() }' "$f"
		done
	)
	printf '%s\n' "${uris%%$'\n'*}"
}

DEBIAN_MIRROR=${DEBIAN_MIRROR:-$(apt_uri "$SUITE")}
DEBIAN_UPDATES_MIRROR=${DEBIAN_UPDATES_MIRROR:-$(apt_uri "$SUITE-updates")}
DEBIAN_SECURITY_MIRROR=${DEBIAN_SECURITY_MIRROR:-$(apt_uri "$SUITE-security")}
[ -n "$DEBIAN_MIRROR" ] || {
	echo "no deb source for $SUITE in /etc/apt/sources.list{,.d}: set DEBIAN_MIRROR to a Debian mirror" >&2
	exit 1
}

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
if command -v file >/dev/null && ! file -b "$NATS_SERVER" | grep -q 'statically linked'; then
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

# inputs_hash TEXT [FILE...]: the hash of TEXT and of the files' contents.
inputs_hash() {
	{
		printf '%s\n' "$1"
		shift
		[ "$#" -eq 0 ] || sha256sum "$@"
	} | sha256sum | cut -d' ' -f1
}

# current NAME HASH: NAME exists and was made from inputs of hash HASH.
current() {
	[ -z "$FORCE" ] && [ "$(docker image inspect -f "{{index .Config.Labels \"$INPUTS_LABEL\"}}" "$1" 2>/dev/null)" = "$2" ]
}

# image NAME PREPARE DOCKERFILE [FILE...]: unless NAME is current, fills a
# build context with the function PREPARE (given its directory) and builds
# NAME from DOCKERFILE there. The inputs are DOCKERFILE, PREPARE's own
# source, the files it copies (FILE...) and the base image's ID.
image() {
	local name=$1 prepare=$2 dockerfile=$3
	shift 3
	local hash
	hash=$(inputs_hash "$dockerfile
$(declare -f "$prepare")
$(docker image inspect -f '{{.Id}}' "$BASE_IMAGE")" "$@")
	if current "$name" "$hash"; then
		log "$name is current"
		return
	fi
	local ctx
	ctx=$(mktemp -d -p "$work")
	"$prepare" "$ctx"
	log "building $name"
	docker build -q --label "$INPUTS_LABEL=$hash" -t "$name" -f - "$ctx" <<<"$dockerfile" >/dev/null
	rm -rf "$ctx"
}

# The base: debootstrap's minimal Debian, its apt sources this machine's.
sources="deb $DEBIAN_MIRROR $SUITE main"
[ -z "$DEBIAN_UPDATES_MIRROR" ] || sources+=$'\n'"deb $DEBIAN_UPDATES_MIRROR $SUITE-updates main"
[ -z "$DEBIAN_SECURITY_MIRROR" ] || sources+=$'\n'"deb $DEBIAN_SECURITY_MIRROR $SUITE-security main"
base_hash=$(inputs_hash "debootstrap --variant=minbase $SUITE $DEBIAN_MIRROR
$sources
APT::Install-Recommends false")
if current "$BASE_IMAGE" "$base_hash"; then
	log "$BASE_IMAGE is current"
else
	command -v debootstrap >/dev/null || { echo "debootstrap is missing: apt-get install -y debootstrap" >&2; exit 1; }
	log "debootstrap $SUITE from $DEBIAN_MIRROR (a few minutes)"
	debootstrap --variant=minbase "$SUITE" "$work/rootfs" "$DEBIAN_MIRROR" >"$work/debootstrap.log" 2>&1 ||
		{ tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
	printf '%s\n' "$sources" >"$work/rootfs/etc/apt/sources.list"
	# As Debian's own images: no recommends, no docs, clean apt lists.
	printf 'APT::Install-Recommends "false";\n' >"$work/rootfs/etc/apt/apt.conf.d/90parley-offline"
	rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/"*.bin
	tar -C "$work/rootfs" -c . | docker import -c 'CMD ["bash"]' -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
		-c "LABEL $INPUTS_LABEL=$base_hash" - "$BASE_IMAGE" >/dev/null
	rm -rf "$work/rootfs"
fi

postgres_context() { cp deploy/offline/postgres-entrypoint.sh "$1/docker-entrypoint.sh"; }
postgres_image() {
	local pg_major=${POSTGRES_IMAGE#postgres:}
	pg_major=${pg_major%%[.-]*}
	image "$POSTGRES_IMAGE" postgres_context "$(
		cat <<EOF
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
	)" deploy/offline/postgres-entrypoint.sh
}

redis_context() { cp deploy/offline/redis-entrypoint.sh "$1/docker-entrypoint.sh"; }
redis_image() {
	image "$REDIS_IMAGE" redis_context "$(
		cat <<EOF
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
	)" deploy/offline/redis-entrypoint.sh
}

nats_context() {
	cp "$NATS_SERVER" "$1/nats-server"
	# The official image's default configuration (compose mounts its own).
	printf 'port: 4222\nmonitor_port: 8222\n' >"$1/nats-server.conf"
}
nats_image() {
	image "$NATS_IMAGE" nats_context "$(
		cat <<EOF
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
	)" "$NATS_SERVER"
}

runtime_context() { :; }
runtime_image() {
	image "$RUNTIME_IMAGE" runtime_context "$(
		cat <<EOF
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
	)"
}

# This machine's own CAs (a TLS-inspecting egress proxy, for one): the
# build downloads modules from the Go module proxy as the host does.
local_cas=()
for f in /usr/local/share/ca-certificates/*.crt; do
	[ -f "$f" ] && local_cas+=("$f")
done
go_context() {
	cp -a "$GOROOT_DIR" "$1/go"
	mkdir -p "$1/local-ca"
	[ "${#local_cas[@]}" -eq 0 ] || cp "${local_cas[@]}" "$1/local-ca/"
}
# The toolchain is keyed by its version (in GOLANG_VERSION below), not by
# hashing all of GOROOT.
go_image() {
	image "$GO_IMAGE" go_context "$(
		cat <<EOF
FROM $BASE_IMAGE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates git >/dev/null \\
 && rm -rf /var/lib/apt/lists/*
COPY local-ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY go /usr/local/go
ENV GOLANG_VERSION=${host_go#go} GOTOOLCHAIN=local GOPATH=/go PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /go
EOF
	)" "${local_cas[@]}"
}

# The five images on the base are independent, and mostly wait for Debian's
# mirror: they build side by side, each logging to a file of its own.
pids=() names=()
for kind in postgres redis nats runtime go; do
	"${kind}_image" >"$work/$kind.log" 2>&1 &
	pids+=("$!") names+=("$kind")
done
rc=0
for i in "${!pids[@]}"; do
	if wait "${pids[$i]}"; then
		cat "$work/${names[$i]}.log"
	else
		echo "the ${names[$i]} image failed:" >&2
		cat "$work/${names[$i]}.log" >&2
		rc=1
	fi
done
[ "$rc" -eq 0 ] || exit "$rc"

log "stand-in images ready: $BASE_IMAGE $POSTGRES_IMAGE $REDIS_IMAGE $NATS_IMAGE $RUNTIME_IMAGE $GO_IMAGE"
