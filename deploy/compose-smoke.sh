#!/usr/bin/env bash
# make compose-smoke: starts docker-compose.yml for real and sends through it.
#   1. docker compose build, then up --wait (every healthcheck green, migrate
#      and seed completed);
#   2. the demo key and campaign from parleyctl seed --json;
#   3. a 3-contact campaign through the gateway container, delivered to
#      provider-sim (counted there);
#   4. up --scale campaign-dispatcher=3, then a 10,000-contact campaign (10
#      requests of 1000): every recipient must reach provider-sim exactly
#      once (lost 0, duplicated 0), counted per recipient at provider-sim;
#   5. docker compose down -v, always (trap), failed or not.
# It prints each phase's time. The images must exist or be buildable: on a
# machine without registry access run deploy/offline-images.sh first (make
# offline-images). Environment: COMPOSE (the compose command, default
# "docker compose"), PARLEY_SMOKE_PROJECT (parley-smoke), the published
# ports PARLEY_COMPOSE_GATEWAY_PORT (7780), PARLEY_COMPOSE_ADMIN_PORT (7781),
# PARLEY_COMPOSE_PROVIDER_SIM_PORT (7790), PARLEY_SMOKE_CONTACTS (10000,
# a multiple of 1000), PARLEY_SMOKE_TIMEOUT (seconds to wait for delivery, 300),
# PARLEY_IMAGE_BINARIES (prebuilt: the images take bin/static/; default:
# they compile the services themselves).
# With --build-only it builds the images and stops (make compose-images:
# .ci/run builds them while other checks run; the smoke's own build is then
# BuildKit's cache).
set -euo pipefail
cd "$(dirname "$0")/.."

read -r -a COMPOSE_CMD <<<"${COMPOSE:-docker compose}"
PROJECT=${PARLEY_SMOKE_PROJECT:-parley-smoke}
export PARLEY_COMPOSE_GATEWAY_PORT=${PARLEY_COMPOSE_GATEWAY_PORT:-7780}
export PARLEY_COMPOSE_ADMIN_PORT=${PARLEY_COMPOSE_ADMIN_PORT:-7781}
export PARLEY_COMPOSE_PROVIDER_SIM_PORT=${PARLEY_COMPOSE_PROVIDER_SIM_PORT:-7790}
CONTACTS=${PARLEY_SMOKE_CONTACTS:-10000}
TIMEOUT=${PARLEY_SMOKE_TIMEOUT:-300}
THROUGHPUT=500 # deploy/compose-smoke.yml gives provider-sim the same
# The internal builder talks to the daemon's BuildKit; Bake needs the buildx
# plugin, which Debian's docker.io lacks.
export COMPOSE_BAKE=${COMPOSE_BAKE:-false} DOCKER_BUILDKIT=1

GATEWAY=http://127.0.0.1:$PARLEY_COMPOSE_GATEWAY_PORT
SIM=http://127.0.0.1:$PARLEY_COMPOSE_PROVIDER_SIM_PORT

compose() { "${COMPOSE_CMD[@]}" -p "$PROJECT" -f docker-compose.yml -f deploy/compose-smoke.yml "$@"; }
# PARLEY_IMAGE_BINARIES=prebuilt builds the images from bin/static/ (make
# static-binaries) instead of compiling in the Go image (deploy/docker/Dockerfile).
build_args=()
[ -n "${PARLEY_IMAGE_BINARIES:-}" ] && build_args=(--build-arg "BINARIES=$PARLEY_IMAGE_BINARIES")

phase_start=$SECONDS
timings=()
phase() {
	local now=$SECONDS
	[ -n "${phase_name:-}" ] && timings+=("$(printf '%-34s %4ss' "$phase_name" $((now - phase_start)))")
	phase_name=$1
	phase_start=$now
	echo
	echo "== $1"
}

finish() {
	local rc=$?
	phase "docker compose down -v"
	if [ "$rc" -ne 0 ]; then
		echo "compose-smoke failed (exit $rc); the last log lines of each service:" >&2
		compose logs --no-color --tail 30 >&2 || true
	fi
	compose down -v --remove-orphans --timeout 30 >/dev/null 2>&1 || echo "docker compose down -v failed" >&2
	phase done
	echo
	echo "== compose-smoke timings"
	printf '  %s\n' "${timings[@]}"
	echo "== total ${SECONDS}s, exit $rc"
}

fail() {
	echo "compose-smoke: $*" >&2
	exit 1
}

docker info >/dev/null 2>&1 || fail "docker does not answer: start dockerd"
if [[ ${1:-} == --build-only ]]; then
	compose build --quiet "${build_args[@]}"
	exit 0
fi
"${COMPOSE_CMD[@]}" version >/dev/null 2>&1 || fail "${COMPOSE_CMD[*]} does not run (make compose-smoke builds the pinned compose if Docker has no plugin)"
[ "$((CONTACTS % 1000))" -eq 0 ] && [ "$CONTACTS" -gt 0 ] || fail "PARLEY_SMOKE_CONTACTS must be a multiple of 1000"

# Leftovers of an interrupted run would skew the counts.
compose down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
trap finish EXIT

phase "docker compose build"
compose build --quiet "${build_args[@]}"

# Every long-running service (their dependencies, migrate included, come
# with them). Not seed: --wait counts a one-shot that exited as a failure
# unless another service waits for it; it runs next, as a command.
LONG_RUNNING=(postgres redis nats gateway admin campaign-dispatcher automation-dispatcher provider-sim)

phase "docker compose up --wait"
compose up -d --wait --wait-timeout 180 "${LONG_RUNNING[@]}"

phase "seed"
seed=$(compose run --rm --no-deps -T seed seed --json 2>/dev/null)
KEY=$(jq -r .api_key <<<"$seed")
CAMPAIGN=$(jq -r .campaign_id <<<"$seed")
ACCOUNT=$(jq -r .account_id <<<"$seed")
COMPANY=$(jq -r .company.slug <<<"$seed")
[ -n "$KEY" ] && [ "$KEY" != null ] || fail "parleyctl seed gave no API key: $seed"
echo "company $COMPANY, campaign $CAMPAIGN, account $ACCOUNT"
compose run --rm --no-deps -T seed accounts update "$ACCOUNT" --company "$COMPANY" --throughput "$THROUGHPUT" >/dev/null

# send_campaign FIRST COUNT: POST /api/campaigns/send with the numbers
# +15557000000+FIRST ... (COUNT of them); fails unless 202 with COUNT contacts.
send_campaign() {
	local body status
	body=$(seq "$1" $(($1 + $2 - 1)) | awk '{ printf "+1555%07d\n", 7000000 + $1 }' |
		jq -R . | jq -sc --argjson c "$CAMPAIGN" '{campaign_id: $c, contacts: ., is_forced: true}')
	status=$(curl -sS -o /tmp/compose-smoke-answer.$$ -w '%{http_code}' -X POST "$GATEWAY/api/campaigns/send" \
		-H "service-api-key: $KEY" -H 'Content-Type: application/json' --data-binary "$body")
	local answer
	answer=$(cat /tmp/compose-smoke-answer.$$)
	rm -f /tmp/compose-smoke-answer.$$
	[ "$status" = 202 ] || fail "POST /api/campaigns/send: $status $answer"
	[ "$(jq -r .contacts <<<"$answer")" = "$2" ] || fail "POST /api/campaigns/send accepted $(jq -r .contacts <<<"$answer") of $2: $answer"
}

sim_stats() { curl -fsS "$SIM/_sim/stats"; }

# wait_accepted N: until provider-sim accepted N sends and nothing more
# arrives for 5 s (so that late duplicates are counted too).
wait_accepted() {
	local want=$1 deadline=$((SECONDS + TIMEOUT)) last=-1 stable=0 got
	while :; do
		got=$(sim_stats | jq .accepted)
		if [ "$got" -ge "$want" ]; then
			if [ "$got" = "$last" ]; then
				stable=$((stable + 1))
				[ "$stable" -ge 5 ] && return 0
			else
				stable=0
			fi
		fi
		[ "$SECONDS" -lt "$deadline" ] || fail "provider-sim accepted $got of $want sends within ${TIMEOUT}s"
		last=$got
		sleep 1
	done
}

# count N FIRST: provider-sim's per-recipient counts against the N numbers
# sent from FIRST; prints and checks lost and duplicated.
count() {
	local n=$1 first=$2 recipients expected lost dup extra stats
	stats=$(sim_stats)
	recipients=$(curl -fsS "$SIM/_sim/recipients?min=1&limit=10000")
	expected=$(seq "$first" $((first + n - 1)) | awk '{ printf "+1555%07d\n", 7000000 + $1 }' | sort)
	# provider-sim keys recipients without the '+'.
	lost=$(comm -23 <(sed 's/^+//' <<<"$expected") <(jq -r '.[].to' <<<"$recipients" | sed 's/^+//' | sort) | wc -l)
	dup=$(jq '[.[] | select(.count > 1)] | length' <<<"$recipients")
	extra=$(jq '[.[] | .count - 1] | add // 0' <<<"$recipients")
	printf 'contacts %d, accepted at provider-sim %d, recipients %d, lost %d, duplicated recipients %d (extra sends %d), untracked %d\n' \
		"$n" "$(jq .accepted <<<"$stats")" "$(jq .recipients <<<"$stats")" "$lost" "$dup" "$extra" "$(jq .untracked_sends <<<"$stats")"
	[ "$lost" -eq 0 ] && [ "$dup" -eq 0 ] && [ "$(jq .recipients <<<"$stats")" -eq "$n" ] && [ "$(jq .untracked_sends <<<"$stats")" -eq 0 ] ||
		fail "want every one of the $n recipients exactly once"
}

phase "campaign of 3 through the gateway"
curl -fsS -X POST "$SIM/_sim/reset" >/dev/null
send_campaign 0 3
wait_accepted 3
count 3 0

phase "up --scale campaign-dispatcher=3"
compose up -d --wait --wait-timeout 120 --scale campaign-dispatcher=3 "${LONG_RUNNING[@]}"
replicas=$(compose ps --status running --format '{{.Service}}' | grep -cx campaign-dispatcher || true)
[ "$replicas" -eq 3 ] || fail "$replicas campaign-dispatcher containers running, want 3"
echo "campaign-dispatcher replicas running: $replicas"

phase "campaign of $CONTACTS, 3 dispatchers"
curl -fsS -X POST "$SIM/_sim/reset" >/dev/null
start=$SECONDS
for ((i = 0; i < CONTACTS; i += 1000)); do
	send_campaign $((1000 + i)) 1000
	sleep 0.2 # the gateway's limit: 10 campaign requests a second per company
done
echo "accepted by the gateway: $CONTACTS contacts in $((CONTACTS / 1000)) requests"
wait_accepted "$CONTACTS"
echo "delivered to provider-sim in $((SECONDS - start))s after the first request"
count "$CONTACTS" 1000
# Each replica's share, from its own /metrics (container addresses answer
# from the host on Linux; elsewhere this prints "?").
for id in $(compose ps -q campaign-dispatcher); do
	name=$(docker inspect --format '{{.Name}}' "$id")
	ip=$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$id" | awk '{print $1}')
	sent=$(curl -fsS --max-time 3 "http://$ip:8082/metrics" 2>/dev/null |
		awk '/^parley_delivery_messages_total\{.*outcome="sent"/ { n += $NF } END { print n + 0 }') || sent="?"
	echo "  ${name#/}: sent $sent"
done
