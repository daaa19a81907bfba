#!/usr/bin/env bash
# `make run-check`: runs `make run` the way a newcomer would and checks it.
#
#   1. make run prints the demo API key and every service answers /healthz,
#      all within 60 s (the build is done first and not counted); the
#      README's campaign curl (section "Send a campaign"), sent with that key,
#      is accepted and its batch is delivered (every contact delivered or
#      read in GET /api/batches/{id}) within 60 s more; Ctrl-C (SIGINT to
#      its process group) stops everything and leaves no process.
#   2. With the gateway's port already taken, make run names the gateway and
#      its address, starts nothing, exits non-zero, and leaves no process.
#   3. When a service dies at start (the automation dispatcher, given a port
#      that cannot exist), make run names it, stops the others, exits
#      non-zero, and leaves no process.
#
# It stays off a developer's running stack: private ports, a private NATS
# server and Redis server (the real binaries, on free ports, stopped at the
# end), and a throwaway database on the local PostgreSQL (dropped at the end).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
WORK=$(mktemp -d)
START=$SECONDS
PASSED=0 FAILED=0
OWN_PIDS=()     # private servers and the port squatter
MAKE_SESSION="" # the session of the make run under test

log() { printf 'run-check: %s\n' "$*"; }
fail() {
	log "FAIL: $*"
	FAILED=$((FAILED + 1))
}

tcp_up() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

USED_PORTS=" "
# Below the kernel's ephemeral range (32768 by default): a port chosen
# there may be taken, between the check and the bind, as the source port
# of an outgoing connection (a service's own, to PostgreSQL or NATS); a
# CI run once failed so.
EPHEMERAL_LOW=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
[[ $EPHEMERAL_LOW =~ ^[0-9]+$ ]] && ((EPHEMERAL_LOW > 21000)) || EPHEMERAL_LOW=32768
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % (EPHEMERAL_LOW - 20000)))
		[[ $USED_PORTS == *" $p "* ]] && continue
		tcp_up 127.0.0.1 "$p" && continue
		USED_PORTS+="$p "
		echo "$p"
		return
	done
}

healthy() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
		printf 'GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
		IFS= read -r -t 2 status <&3 || exit 1
		[[ $status == HTTP/1.?" 200"* ]]
	) 2>/dev/null
}

# session_procs SID: the processes still in the session (ours, by construction).
session_procs() { ps -e -o pid=,sid=,args= | awk -v s="$1" '$2 == s'; }

kill_session() {
	local sid=$1 pids
	[[ -n $sid ]] || return 0
	pids=$(session_procs "$sid" | awk '{print $1}')
	[[ -n $pids ]] && kill -KILL $pids 2>/dev/null || true
}

DB="parley_runcheck_$$_$RANDOM"
cleanup() {
	kill_session "$MAKE_SESSION"
	local pid
	for pid in "${OWN_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	for pid in "${OWN_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	if command -v psql >/dev/null; then
		psql -q "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable" \
			-c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || log "could not drop database $DB"
	else
		log "psql not found: drop database $DB by hand"
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT

# ---------------------------------------------------------------- set-up
log "building (not timed)"
bash deploy/local/run.sh --build-only >/dev/null

NATS_PORT=$(free_port)
REDIS_PORT=$(free_port)
mkdir -p "$WORK/nats" "$WORK/redis"
# The pinned nats-server (make run-check passes bin/'s), Debian's otherwise.
"${PARLEY_NATS_SERVER:-/usr/sbin/nats-server}" -a 127.0.0.1 -p "$NATS_PORT" -js -sd "$WORK/nats" >"$WORK/nats.log" 2>&1 &
OWN_PIDS+=($!)
redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no --dir "$WORK/redis" >"$WORK/redis.log" 2>&1 &
OWN_PIDS+=($!)
for _ in $(seq 50); do
	tcp_up 127.0.0.1 "$NATS_PORT" && tcp_up 127.0.0.1 "$REDIS_PORT" && break
	sleep 0.2
done

GATEWAY_PORT=$(free_port) ADMIN_PORT=$(free_port) CAMPAIGN_PORT=$(free_port) AUTOMATION_PORT=$(free_port) SIM_PORT=$(free_port)
SENDER_PORT=$(free_port)
PORTS=("$GATEWAY_PORT" "$ADMIN_PORT" "$CAMPAIGN_PORT" "$AUTOMATION_PORT" "$SIM_PORT" "$SENDER_PORT")
export PARLEY_POSTGRES_URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable"
export PARLEY_NATS_URL="nats://127.0.0.1:$NATS_PORT"
export PARLEY_REDIS_ADDR="127.0.0.1:$REDIS_PORT"
export PARLEY_GATEWAY_ADDR="127.0.0.1:$GATEWAY_PORT"
export PARLEY_ADMIN_ADDR="127.0.0.1:$ADMIN_PORT"
export PARLEY_CAMPAIGN_DISPATCHER_ADDR="127.0.0.1:$CAMPAIGN_PORT"
export PARLEY_AUTOMATION_DISPATCHER_ADDR="127.0.0.1:$AUTOMATION_PORT"
export PARLEY_PROVIDER_SIM_ADDR="127.0.0.1:$SIM_PORT"
export PARLEY_WEBHOOK_SENDER_ADDR="127.0.0.1:$SENDER_PORT"
export PARLEY_RUN_DIR="$WORK/run"
export NO_COLOR=1

# start_make LOG: make run in a session of its own, with SIGINT at its default
# disposition (a background job of a script starts with it ignored, and bash
# cannot trap a signal ignored at entry), as it is under a terminal.
start_make() {
	setsid env --default-signal=INT make -s run >"$1" 2>&1 &
	MAKE_SESSION=$!
}

# wait_gone PID SECONDS: whether the process ended in time.
wait_gone() {
	local i
	for ((i = 0; i < $2 * 5; i++)); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.2
	done
	return 1
}

no_leftovers() {
	local left
	left=$(session_procs "$MAKE_SESSION")
	if [[ -n $left ]]; then
		fail "$1: processes left running:"$'\n'"$left"
		kill_session "$MAKE_SESSION"
		return 1
	fi
	local p
	for p in "${PORTS[@]}"; do
		if tcp_up 127.0.0.1 "$p" && [[ $p != "${SQUATTED:-}" ]]; then
			fail "$1: port $p still answers"
			return 1
		fi
	done
}

# readme_campaign_curl: the first campaign curl of README.md's "Send a
# campaign" section, continuation lines included.
readme_campaign_curl() {
	awk '/^### Send a campaign/ { f = 1 } f && /^curl .*\/api\/campaigns\/send/ { p = 1 } p { print; if ($0 !~ /\\$/) exit }' README.md
}

# batch_count JSON STATE: a message count of a GET /api/batches/{id} answer.
batch_count() { grep -o "\"$2\":[0-9]*" <<<"$1" | head -1 | cut -d: -f2; }

# campaign_delivered KEY: sends the README's campaign with the demo key and
# waits until GET /api/batches/{id} counts every accepted contact delivered
# or read: the stack make run started does what the README says.
campaign_delivered() {
	local key=$1 cmd answer batch contacts status="" t0=$SECONDS delivered read
	cmd=$(readme_campaign_curl)
	if [[ -z $cmd ]]; then
		fail "campaign: no campaign curl found in README.md's \"Send a campaign\" section"
		return 1
	fi
	cmd=${cmd//http:\/\/127.0.0.1:8080/http://127.0.0.1:$GATEWAY_PORT}
	answer=$(KEY=$key bash -c "$cmd" 2>&1) || true
	batch=$(grep -o '"batch_id":"[^"]*"' <<<"$answer" | cut -d'"' -f4 || true)
	contacts=$(grep -o '"contacts":[0-9]*' <<<"$answer" | cut -d: -f2 || true)
	if [[ $answer != '{"status":"accepted",'* || -z $batch || -z $contacts ]]; then
		fail "campaign: the README's curl was not accepted: $answer"
		return 1
	fi
	while ((SECONDS - t0 < 60)); do
		status=$(curl -sS "http://127.0.0.1:$GATEWAY_PORT/api/batches/$batch" -H "service-api-key: $key" 2>&1) || true
		delivered=$(batch_count "$status" delivered) read=$(batch_count "$status" read)
		if [[ -n $delivered && -n $read ]] && ((delivered + read == contacts)); then
			log "the README's campaign: $contacts contacts accepted (batch $batch), delivered or read $((SECONDS - t0))s later"
			return 0
		fi
		# Completed with nothing left in sent: no status callback can still
		# deliver what is missing (failed or skipped).
		if [[ $status == *'"status":"completed"'* && $(batch_count "$status" sent) == 0 ]]; then
			fail "campaign: batch $batch completed with $((delivered + read)) of $contacts delivered or read: $status"
			return 1
		fi
		sleep 0.5
	done
	fail "campaign: batch $batch not delivered within 60s (want $contacts delivered or read): $status"
	return 1
}

# ---------------------------------------------------- 1. start and Ctrl-C
scenario_run_and_interrupt() {
	local out="$WORK/run.log" t0=$SECONDS key="" p ok
	start_make "$out"
	while ((SECONDS - t0 < 60)); do
		kill -0 "$MAKE_SESSION" 2>/dev/null || break
		key=$(grep -o 'service-api-key): service_[A-Za-z0-9_]*' "$out" | head -1 || true)
		ok=true
		for p in "${PORTS[@]}"; do healthy "$p" || ok=false; done
		[[ -n $key ]] && $ok && break
		sleep 0.5
	done
	local took=$((SECONDS - t0))
	if [[ -z $key ]] || ! $ok; then
		fail "start: demo key printed: ${key:+yes}${key:-no}; all /healthz answering: $ok, after ${took}s"
		sed 's/^/    | /' "$out" | tail -40
		kill_session "$MAKE_SESSION"
		return
	fi
	log "key printed and every /healthz answered ${took}s after make run started"
	if ! campaign_delivered "${key##* }"; then
		sed 's/^/    | /' "$out" | tail -40
		kill_session "$MAKE_SESSION"
		return
	fi

	kill -INT -- "-$MAKE_SESSION"
	if ! wait_gone "$MAKE_SESSION" 30; then
		fail "Ctrl-C: make run still running 30s after SIGINT"
		sed 's/^/    | /' "$out" | tail -20
		kill_session "$MAKE_SESSION"
		return
	fi
	if ! grep -q '==> stopped' "$out"; then
		fail "Ctrl-C: make run did not report a clean stop"
		sed 's/^/    | /' "$out" | tail -20
		return
	fi
	no_leftovers "Ctrl-C" || return
	log "ok: Ctrl-C stopped every service; no process left ($((SECONDS - t0))s)"
	PASSED=$((PASSED + 1))
}

# -------------------------------------------------- 2. a port already taken
scenario_port_taken() {
	local out="$WORK/taken.log" t0=$SECONDS status=0 squatter
	# Our own provider-sim holds the gateway's port.
	PARLEY_PROVIDER_SIM_ADDR="127.0.0.1:$GATEWAY_PORT" bin/provider-sim >"$WORK/squatter.log" 2>&1 &
	squatter=$!
	OWN_PIDS+=("$squatter")
	SQUATTED=$GATEWAY_PORT
	for _ in $(seq 50); do
		healthy "$GATEWAY_PORT" && break
		sleep 0.1
	done
	start_make "$out"
	if ! wait_gone "$MAKE_SESSION" 60; then
		fail "port taken: make run still running after 60s with the gateway's port taken"
		kill_session "$MAKE_SESSION"
		return
	fi
	wait "$MAKE_SESSION" || status=$?
	if ((status == 0)) || ! grep -q "==> gateway cannot listen on 127.0.0.1:$GATEWAY_PORT.*PARLEY_GATEWAY_ADDR" "$out"; then
		fail "port taken: exit status $status; want non-zero and a line naming the gateway, its address and PARLEY_GATEWAY_ADDR"
		sed 's/^/    | /' "$out" | tail -20
		return
	fi
	no_leftovers "port taken" || return
	kill -TERM "$squatter" 2>/dev/null || true
	wait "$squatter" 2>/dev/null || true
	SQUATTED=""
	log "ok: the taken port was named and nothing started; exit status $status ($((SECONDS - t0))s)"
	PASSED=$((PASSED + 1))
}

# ------------------------------------------- 3. a service that dies at start
scenario_dies_at_start() {
	local out="$WORK/dies.log" t0=$SECONDS status=0
	# A port number no listener accepts: the dispatcher exits at start while
	# the other services are already up.
	PARLEY_AUTOMATION_DISPATCHER_ADDR=127.0.0.1:99999 start_make "$out"
	if ! wait_gone "$MAKE_SESSION" 60; then
		fail "dies at start: make run still running after 60s"
		kill_session "$MAKE_SESSION"
		return
	fi
	wait "$MAKE_SESSION" || status=$?
	if ((status == 0)) || ! grep -q '==> automation-dispatcher exited with status [1-9][0-9]* while starting.*stopping the others' "$out"; then
		fail "dies at start: exit status $status; want non-zero and a line naming the automation-dispatcher"
		sed 's/^/    | /' "$out" | tail -20
		return
	fi
	no_leftovers "dies at start" || return
	log "ok: the automation-dispatcher's failure was named and the others stopped; exit status $status ($((SECONDS - t0))s)"
	PASSED=$((PASSED + 1))
}

scenario_run_and_interrupt
scenario_port_taken
scenario_dies_at_start

log "took $((SECONDS - START))s in all"
echo "run-check: $PASSED passed, $FAILED failed"
((FAILED == 0))
