#!/usr/bin/env bash
# `make run`: build Parley, make sure PostgreSQL, Redis and NATS are up,
# create and migrate the database, seed the demo company, then run every
# service in the foreground with prefixed logs until Ctrl-C, which stops them
# all (SIGTERM, a grace period, then SIGKILL for stragglers).
#
#   deploy/local/run.sh              build, prepare, run
#   deploy/local/run.sh --build-only build bin/ and stop
#
# Every setting below can be overridden from the environment, e.g.
#   PARLEY_GATEWAY_ADDR=127.0.0.1:18080 make run
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
BIN="$ROOT/bin"
RUN_DIR="${PARLEY_RUN_DIR:-$ROOT/.run}"

# ---------------------------------------------------------------- settings
export PARLEY_POSTGRES_URL="${PARLEY_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/parley?sslmode=disable}"
export PARLEY_REDIS_ADDR="${PARLEY_REDIS_ADDR:-127.0.0.1:6379}"
export PARLEY_NATS_URL="${PARLEY_NATS_URL:-nats://127.0.0.1:4222}"

export PARLEY_GATEWAY_ADDR="${PARLEY_GATEWAY_ADDR:-127.0.0.1:8080}"
export PARLEY_ADMIN_ADDR="${PARLEY_ADMIN_ADDR:-127.0.0.1:8081}"
export PARLEY_CAMPAIGN_DISPATCHER_ADDR="${PARLEY_CAMPAIGN_DISPATCHER_ADDR:-127.0.0.1:8082}"
export PARLEY_AUTOMATION_DISPATCHER_ADDR="${PARLEY_AUTOMATION_DISPATCHER_ADDR:-127.0.0.1:8083}"
export PARLEY_PROVIDER_SIM_ADDR="${PARLEY_PROVIDER_SIM_ADDR:-127.0.0.1:9090}"
export PARLEY_WEBHOOK_SENDER_ADDR="${PARLEY_WEBHOOK_SENDER_ADDR:-127.0.0.1:8086}"
# Webhook endpoints may point at provider-sim's test receiver on loopback
# (http://127.0.0.1:9090/_webhooks/hooks/<name>): never set this in production.
export PARLEY_WEBHOOKS_ALLOW_PRIVATE="${PARLEY_WEBHOOKS_ALLOW_PRIVATE:-true}"
export PARLEY_LOG_FORMAT="${PARLEY_LOG_FORMAT:-console}"

# The demo messaging account: parleyctl seed stores it, provider-sim accepts it.
export PARLEY_DEMO_PHONE_NUMBER_ID="${PARLEY_DEMO_PHONE_NUMBER_ID:-15550100001}"
export PARLEY_DEMO_ACCESS_TOKEN="${PARLEY_DEMO_ACCESS_TOKEN:-parley-demo-access-token}"
# The gateway verifies provider callbacks (X-Hub-Signature-256) with this secret.
export PARLEY_WEBHOOK_APP_SECRET="${PARLEY_WEBHOOK_APP_SECRET:-parley-local-webhook-secret}"

STOP_TIMEOUT="${PARLEY_RUN_STOP_TIMEOUT:-15}"   # seconds between SIGTERM and SIGKILL
START_TIMEOUT="${PARLEY_RUN_START_TIMEOUT:-30}" # seconds for every /healthz to answer

# host:port a client dials for a listen address (":8080" -> 127.0.0.1:8080).
dial_addr() {
	local addr=$1 host port
	host=${addr%:*} port=${addr##*:}
	case $host in "" | 0.0.0.0 | "[::]") host=127.0.0.1 ;; esac
	echo "$host:$port"
}
GATEWAY_URL="http://$(dial_addr "$PARLEY_GATEWAY_ADDR")"
ADMIN_URL="http://$(dial_addr "$PARLEY_ADMIN_ADDR")"
SIM_URL="http://$(dial_addr "$PARLEY_PROVIDER_SIM_ADDR")"

# provider-sim: the demo account, and where its status callbacks go, signed
# with the gateway's app secret.
export PARLEY_PROVIDER_SIM_ACCOUNTS="${PARLEY_PROVIDER_SIM_ACCOUNTS:-$PARLEY_DEMO_PHONE_NUMBER_ID:$PARLEY_DEMO_ACCESS_TOKEN}"
export PARLEY_PROVIDER_SIM_CALLBACK_URL="${PARLEY_PROVIDER_SIM_CALLBACK_URL:-$GATEWAY_URL/webhooks/whatsapp}"
export PARLEY_PROVIDER_SIM_APP_SECRET="${PARLEY_PROVIDER_SIM_APP_SECRET:-$PARLEY_WEBHOOK_APP_SECRET}"
# The dispatchers' WhatsApp client talks to provider-sim instead of the Cloud API.
export PARLEY_WHATSAPP_BASE_URL="${PARLEY_WHATSAPP_BASE_URL:-$SIM_URL}"

SERVICES=(provider-sim gateway admin campaign-dispatcher automation-dispatcher webhook-sender)
declare -A ADDR_VAR=(
	[provider-sim]=PARLEY_PROVIDER_SIM_ADDR
	[gateway]=PARLEY_GATEWAY_ADDR
	[admin]=PARLEY_ADMIN_ADDR
	[campaign-dispatcher]=PARLEY_CAMPAIGN_DISPATCHER_ADDR
	[automation-dispatcher]=PARLEY_AUTOMATION_DISPATCHER_ADDR
	[webhook-sender]=PARLEY_WEBHOOK_SENDER_ADDR
)
declare -A ADDR=()
for name in "${SERVICES[@]}"; do ADDR[$name]=${!ADDR_VAR[$name]}; done

# ----------------------------------------------------------------- output
if [[ -t 1 && -z ${NO_COLOR:-} ]]; then
	BOLD=$'\e[1m' RED=$'\e[31m' RESET=$'\e[0m'
	declare -A COLOR=([provider-sim]=$'\e[35m' [gateway]=$'\e[32m' [admin]=$'\e[34m'
		[campaign-dispatcher]=$'\e[36m' [automation-dispatcher]=$'\e[33m' [webhook-sender]=$'\e[91m')
else
	BOLD="" RED="" RESET=""
	declare -A COLOR=()
fi
say() { printf '%s==>%s %s\n' "$BOLD" "$RESET" "$*"; }
die() {
	printf '%s==> %s%s\n' "$RED" "$*" "$RESET" >&2
	exit 1
}

# --------------------------------------------------------------- building
if ! command -v go >/dev/null && [[ -x /usr/local/go/bin/go ]]; then
	PATH="/usr/local/go/bin:$PATH"
fi
command -v go >/dev/null || die "go not found: install Go 1.26 or newer (https://go.dev/dl/) and put it on PATH"

say "building into bin/"
# Static and -trimpath, as the images' binaries and the tests' builds
# (deploy/static-binaries.sh): one compile of each package serves them all.
CGO_ENABLED=0 go build -trimpath -o "$BIN/" ./services/gateway ./services/admin ./services/dispatcher/cmd/campaign-dispatcher \
	./services/dispatcher/cmd/automation-dispatcher ./services/provider-sim ./services/webhook-sender ./services/admin/cmd/parleyctl
[[ ${1:-} == --build-only ]] && exit 0

# ------------------------------------------------------- local servers
tcp_up() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
is_local() { [[ $1 == 127.0.0.1 || $1 == localhost || $1 == ::1 ]]; }

# ensure_server NAME HOST PORT PACKAGE BINARY START-COMMAND...
# Starts a stopped local server the way /work/shared/SERVICES.md does, or
# says which Debian package to install.
ensure_server() {
	local name=$1 host=$2 port=$3 pkg=$4 binary=$5
	shift 5
	tcp_up "$host" "$port" && return 0
	is_local "$host" || die "$name at $host:$port is not reachable (it is not on this machine, so make run cannot start it)"
	[[ -x $binary ]] || command -v "$binary" >/dev/null ||
		die "$name is not installed: apt-get update && apt-get install -y $pkg"
	say "$name is not running on $host:$port: starting it"
	"$@" || die "could not start $name (command: $*)"
	local i
	for ((i = 0; i < 100; i++)); do
		tcp_up "$host" "$port" && return 0
		sleep 0.2
	done
	die "$name did not come up on $host:$port"
}

[[ $PARLEY_POSTGRES_URL =~ ^postgres(ql)?://([^@/]*@)?(\[[^]]*\]|[^:/?]+)?(:([0-9]+))? ]] ||
	die "PARLEY_POSTGRES_URL: cannot read a host from $PARLEY_POSTGRES_URL"
PG_HOST=${BASH_REMATCH[3]:-127.0.0.1} PG_PORT=${BASH_REMATCH[5]:-5432}
REDIS_HOST=${PARLEY_REDIS_ADDR%:*} REDIS_PORT=${PARLEY_REDIS_ADDR##*:}
NATS_HOSTPORT=${PARLEY_NATS_URL%%,*}
NATS_HOSTPORT=${NATS_HOSTPORT#*://}
NATS_HOSTPORT=${NATS_HOSTPORT#*@}
NATS_HOST=${NATS_HOSTPORT%:*} NATS_PORT=${NATS_HOSTPORT##*:}

start_postgres() { pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start; }
start_redis() {
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/ci.log
}
start_nats() {
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
		-a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}
ensure_server PostgreSQL "$PG_HOST" "$PG_PORT" postgresql pg_ctlcluster start_postgres
ensure_server Redis "$REDIS_HOST" "$REDIS_PORT" redis-server redis-server start_redis
ensure_server NATS "$NATS_HOST" "$NATS_PORT" nats-server /usr/sbin/nats-server start_nats

# ------------------------------------------------------ database and seed
say "migrating (the database is created if missing)"
"$BIN/parleyctl" migrate --create-database
say "seeding the demo company"
mkdir -p "$RUN_DIR"
"$BIN/parleyctl" seed --gateway-url "$GATEWAY_URL" --console-url "$ADMIN_URL" >"$RUN_DIR/seed.txt"

# --------------------------------------------------------------- services
declare -A PID=()
PREFIXERS=()
STOPPING=false

# prefix NAME: copies stdin to stdout, each line led by "NAME |".
prefix() {
	local label line
	label=$(printf '%-21s |' "$1")
	while IFS= read -r line || [[ -n $line ]]; do
		printf '%s%s%s %s\n' "${COLOR[$1]:-}" "$label" "$RESET" "$line"
	done
}

start_service() {
	local name=$1 fifo="$RUN_DIR/$1.log"
	rm -f "$fifo"
	mkfifo "$fifo"
	# The prefixer ignores Ctrl-C so that it outlives its service and prints
	# the shutdown logs; it ends when the service closes its output.
	(
		trap '' INT TERM
		prefix "$name" <"$fifo"
	) &
	PREFIXERS+=($!)
	"$BIN/$name" >"$fifo" 2>&1 &
	PID[$name]=$!
}

alive() { kill -0 "$1" 2>/dev/null; }

# stop_all: SIGTERM to every service, up to STOP_TIMEOUT seconds for them to
# finish, SIGKILL for any still running, then reap them and their prefixers.
stop_all() {
	local name pid deadline=$((SECONDS + STOP_TIMEOUT)) waiting
	for name in "${!PID[@]}"; do
		kill -TERM "${PID[$name]}" 2>/dev/null || true
	done
	while ((SECONDS < deadline)); do
		waiting=false
		for pid in "${PID[@]}"; do alive "$pid" && waiting=true; done
		$waiting || break
		sleep 0.2
	done
	for name in "${!PID[@]}"; do
		if alive "${PID[$name]}"; then
			say "$name did not stop within ${STOP_TIMEOUT}s: killing it"
			kill -KILL "${PID[$name]}" 2>/dev/null || true
		fi
	done
	for pid in "${PID[@]}" "${PREFIXERS[@]}"; do wait "$pid" 2>/dev/null || true; done
	PID=() PREFIXERS=()
	rm -f "$RUN_DIR"/*.log
}

on_signal() {
	STOPPING=true
	trap '' INT TERM
	echo
	say "stopping every service"
	stop_all
	say "stopped"
	exit 0
}
# Whatever ends this script (an error included) takes the services with it.
trap 'stop_all' EXIT
trap 'on_signal' INT TERM

# service_failed NAME: the service exited; report it, stop the rest, fail.
service_failed() {
	local status=0
	wait "${PID[$1]}" || status=$?
	unset "PID[$1]"
	die "$1 exited with status $status$2; stopping the others"
}

# healthy ADDR: GET /healthz answers 200.
healthy() {
	local hostport host port status
	hostport=$(dial_addr "$1")
	host=${hostport%:*} port=${hostport##*:}
	(
		exec 3<>"/dev/tcp/$host/$port" || exit 1
		printf 'GET /healthz HTTP/1.0\r\nHost: %s\r\n\r\n' "$hostport" >&3
		IFS= read -r -t 2 status <&3 || exit 1
		[[ $status == HTTP/1.?" 200"* ]]
	) 2>/dev/null
}

# A port already taken (often another make run) would only show as a failed
# listen in a service's log: say it plainly instead.
for name in "${SERVICES[@]}"; do
	hostport=$(dial_addr "${ADDR[$name]}")
	if tcp_up "${hostport%:*}" "${hostport##*:}"; then
		die "$name cannot listen on ${ADDR[$name]}: something already answers there (another make run?); stop it, or choose another address with ${ADDR_VAR[$name]}"
	fi
done

say "starting ${SERVICES[*]}"
for name in "${SERVICES[@]}"; do start_service "$name"; done

declare -A UP=()
deadline=$((SECONDS + START_TIMEOUT))
while ((${#UP[@]} < ${#SERVICES[@]})); do
	for name in "${SERVICES[@]}"; do
		[[ -n ${UP[$name]:-} ]] && continue
		alive "${PID[$name]}" || service_failed "$name" " while starting (its log is above)"
		healthy "${ADDR[$name]}" && UP[$name]=1
	done
	if ((SECONDS >= deadline)); then
		for name in "${SERVICES[@]}"; do
			[[ -z ${UP[$name]:-} ]] && die "$name did not answer GET /healthz on ${ADDR[$name]} within ${START_TIMEOUT}s; stopping the others"
		done
	fi
	sleep 0.2
done

echo
say "Parley is running"
cat "$RUN_DIR/seed.txt"
echo
for name in "${SERVICES[@]}"; do
	printf '  %-21s http://%s/healthz\n' "$name" "$(dial_addr "${ADDR[$name]}")"
done
echo
say "logs follow; press Ctrl-C to stop everything"

# Run until Ctrl-C (the trap) or until a service exits on its own.
while true; do
	wait -n "${PID[@]}" || true
	$STOPPING && break
	for name in "${!PID[@]}"; do
		alive "${PID[$name]}" || service_failed "$name" ""
	done
done
