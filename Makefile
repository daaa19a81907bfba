# Parley's commands. `make help` lists them.
#
# The Go commands run over the modules go.work uses (pkg, services/*,
# testkit and testkit/system, which holds the load tests and drills), all of
# them in one command. deploy/docker/healthcheck is a module of its own
# outside the workspace (it is part of the images, not of Parley), so it
# runs with GOWORK=off.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

MODULES := $(patsubst $(CURDIR)/%,%,$(shell go list -m -f '{{.Dir}}'))
SERVICES := $(filter services/%,$(MODULES))
TOOL_MODULES := deploy/docker/healthcheck
BIN := $(CURDIR)/bin
# Every package of the workspace as patterns (./pkg/... ./services/gateway/...):
# one go command over them all has the workspace's one build list, as a
# command in each module has, and builds and runs packages of different
# modules side by side instead of one module after another.
PACKAGES := $(addprefix ./,$(addsuffix /...,$(MODULES)))

# Pinned tools, built into TOOLS (bin/, gitignored, unless set: .ci/run
# keeps them outside the clone) with the version in the file name, so that
# changing a pin rebuilds the tool.
TOOLS ?= $(BIN)
STATICCHECK_VERSION := v0.8.2
PROTOC_GEN_GO_VERSION := v1.36.12
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)
PROTOC_GEN_GO := $(TOOLS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION)
# The one NATS version (docs/operations.md, "NATS versions"): the tests embed it
# (testkit/go.mod), the drills and compose-smoke run this binary, and
# docker-compose.yml and deploy/k8s name the image nats:<version>-alpine.
# testkit/deploycheck fails when they disagree.
NATS_SERVER_VERSION := v2.15.2
NATS_SERVER := $(TOOLS)/nats-server-$(NATS_SERVER_VERSION)
# v5.8.3 needs Go 1.27; the machines have 1.26.
KUSTOMIZE_VERSION := v5.8.2
KUSTOMIZE := $(TOOLS)/kustomize-$(KUSTOMIZE_VERSION)
# Only for machines whose Docker has no compose plugin (Debian's docker.io).
COMPOSE_VERSION := v2.40.3
DOCKER_COMPOSE := $(TOOLS)/docker-compose-$(COMPOSE_VERSION)
# The generated code records the protoc version; Debian 12's is 3.21.12.
PROTOC_VERSION := 3.21.12
PROTOC ?= protoc
GO_MODULE := github.com/parleyhq/parley
PROTOS := $(shell find proto -name '*.proto' | sort)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## build every service's programs (parleyctl included) into bin/
	@for m in $(SERVICES); do echo "== build $$m"; (cd $$m && CGO_ENABLED=0 go build -trimpath -o $(BIN)/ ./...); done

.PHONY: static-binaries
static-binaries: ## build the images' binaries on this machine into bin/static/ (for BINARIES=prebuilt images)
	@bash deploy/static-binaries.sh $(BIN)/static

.PHONY: test
test: ## run every module's tests with -race against the local servers
	@echo "== go test -race $(PACKAGES)"; go test -race -count=1 $(PACKAGES)
	@for m in $(TOOL_MODULES); do echo "== $$m"; (cd $$m && GOWORK=off go test -race -count=1 ./...); done

.PHONY: compose-check
# With PARLEY_KUSTOMIZE set, deploycheck renders deploy/k8s with the pinned
# kustomize and the services' workload checks read the rendered objects.
compose-check: $(KUSTOMIZE) ## check docker-compose.yml, the Dockerfile and deploy/k8s (as kustomize build renders it) against the code
	@echo "== kustomize build deploy/k8s"; $(KUSTOMIZE) build deploy/k8s >/dev/null
	@echo "== testkit/deploycheck"; PARLEY_KUSTOMIZE=$(KUSTOMIZE) go test -count=1 ./testkit/deploycheck/
	@echo "== $(SERVICES)"; PARLEY_KUSTOMIZE=$(KUSTOMIZE) go test -count=1 -run '^(TestComposeService|TestKubernetesWorkload)$$' $(addprefix ./,$(addsuffix /internal/config/,$(SERVICES)))

# The build tags of the drills and benchmarks (go test -tags drill|bench).
# Lint checks every package once with both tags on. While only test files
# carry the tags, a package's files, and those of everything it imports,
# are the same with and without them, except in the packages that hold
# tagged files (a file of //go:build !drill drops out with the tag): those
# are checked a second time without the tags (every package is, once a
# file that is not a test carries a tag).
LINT_TAGS := drill,bench

.PHONY: lint
lint: $(STATICCHECK) ## gofmt, the layers' imports, go vet and staticcheck on every module, with the drill and bench build tags (and again without them where files use them)
	@echo "== gofmt"; bad=$$(find . -name '*.go' -not -path './.git/*' -not -path './bin/*' -print0 | xargs -0 gofmt -l); \
	  if [ -n "$$bad" ]; then echo "gofmt would change these files (run gofmt -w):"; echo "$$bad"; exit 1; fi
	@echo "== layering (testkit/layering: pkg < services, pkg < testkit < testkit/system)"; cd testkit && go run ./cmd/layering
	@rc=0; \
	  echo "== vet, staticcheck -tags $(LINT_TAGS) $(PACKAGES)"; \
	  go vet -tags $(LINT_TAGS) $(PACKAGES) || rc=1; \
	  $(STATICCHECK) -tags $(LINT_TAGS) $(PACKAGES) || rc=1; \
	  files=$$(grep -rlE '^//go:build .*\b(drill|bench)\b' --include='*.go' $(MODULES) || true); untagged=; \
	  if [ -z "$$files" ]; then :; elif grep -qv '_test\.go$$' <<<"$$files"; then untagged="$(PACKAGES)"; \
	  else \
	    untagged=$$(go list -e -f '{{if or .GoFiles .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' $$(xargs -n1 dirname <<<"$$files" | sort -u | sed 's|^|./|') | sed "s|^$(CURDIR)/|./|"); \
	  fi; \
	  if [ -n "$$untagged" ]; then \
	    echo "== vet, staticcheck without tags" $$untagged; \
	    go vet $$untagged || rc=1; \
	    $(STATICCHECK) $$untagged || rc=1; \
	  fi; \
	  for m in $(TOOL_MODULES); do echo "== vet, staticcheck $$m"; (cd $$m && GOWORK=off go vet ./... && GOWORK=off $(STATICCHECK) ./...) || rc=1; done; \
	  exit $$rc

.PHONY: proto
proto: $(PROTOC_GEN_GO) ## regenerate the Go code of proto/ (committed under pkg/)
	@$(call protoc,$(CURDIR))

.PHONY: proto-check
proto-check: $(PROTOC_GEN_GO) ## fail with a diff when the committed generated code is stale
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  $(call protoc,$$tmp); \
	  rc=0; \
	  for f in $$(cd "$$tmp" && find . -name '*.pb.go' | sort); do \
	    diff -u "$${f#./}" "$$tmp/$${f#./}" || rc=1; \
	  done; \
	  for f in $$(find pkg -name '*.pb.go' | sort); do \
	    [ -f "$$tmp/$$f" ] || { echo "$$f: no .proto in proto/ generates it (remove it?)"; rc=1; }; \
	  done; \
	  if [ $$rc -ne 0 ]; then echo "generated code differs from proto/: run make proto and commit"; exit 1; fi; \
	  echo "generated code is up to date"

# protoc runs protoc on every .proto into the directory $(1), laid out like
# the repository (pkg/bus/sendsv1/...).
define protoc
command -v $(PROTOC) >/dev/null || { echo "$(PROTOC) is missing: apt-get install -y protobuf-compiler"; exit 1; }; \
[ "$$($(PROTOC) --version)" = "libprotoc $(PROTOC_VERSION)" ] || echo "warning: $$($(PROTOC) --version), the committed code was made with $(PROTOC_VERSION)"; \
$(PROTOC) -I proto --plugin=protoc-gen-go=$(PROTOC_GEN_GO) --go_out=$(1) --go_opt=module=$(GO_MODULE) $(PROTOS) \
  || { echo "protoc failed; google/protobuf/*.proto come with Debian's libprotobuf-dev (apt-get install -y protobuf-compiler libprotobuf-dev)"; exit 1; }
endef

$(STATICCHECK):
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  GOWORK=off GOBIN=$$tmp go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) && mkdir -p $(@D) && mv $$tmp/staticcheck $@

$(PROTOC_GEN_GO):
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  GOWORK=off GOBIN=$$tmp go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION) && mkdir -p $(@D) && mv $$tmp/protoc-gen-go $@

# Static (CGO_ENABLED=0): the offline nats image copies it into a scratch image.
$(NATS_SERVER):
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  CGO_ENABLED=0 GOWORK=off GOBIN=$$tmp go install -ldflags='-s -w' github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION) && mkdir -p $(@D) && mv $$tmp/nats-server $@

$(KUSTOMIZE):
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	  GOWORK=off GOBIN=$$tmp go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION) && mkdir -p $(@D) && mv $$tmp/kustomize $@

# Its go.mod has exclude directives, so go install refuses it: build it in
# the downloaded module (read-only, the binary goes to bin/).
$(DOCKER_COMPOSE):
	@dir=$$(GOWORK=off GOFLAGS=-mod=mod go mod download -json github.com/docker/compose/v2@$(COMPOSE_VERSION) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p'); \
	  mkdir -p $(@D) && cd "$$dir" && CGO_ENABLED=0 GOWORK=off GOFLAGS=-buildvcs=false go build -trimpath -ldflags='-s -w -X github.com/docker/compose/v2/internal.Version=$(COMPOSE_VERSION)' -o $@ ./cmd

# The pinned compose plugin, for machines whose Docker has none (Debian's
# docker.io): COMPOSE_CMD builds it on first use; .ci/run builds it early,
# in the background, while apt and the module downloads wait on the network.
.PHONY: compose-tool
compose-tool: $(DOCKER_COMPOSE)

.PHONY: tools
tools: $(NATS_SERVER) $(KUSTOMIZE) ## build the pinned nats-server and kustomize into bin/
	@echo "$(NATS_SERVER)"; echo "$(KUSTOMIZE)"

# .ci/run builds these first, in the background (make offline-images
# builds nats-server, make compose-images compose).
.PHONY: lint-tools
lint-tools: $(STATICCHECK) $(PROTOC_GEN_GO) $(KUSTOMIZE)

# Running the stack, load tests and fault drills (run, bench-*, drill-*)
# go below this line.

.PHONY: run
run: ## build, start the local servers if stopped, migrate, seed the demo company and run every service until Ctrl-C
	@bash deploy/local/run.sh

.PHONY: run-check
run-check: $(NATS_SERVER) ## make run on private ports and servers: demo key and every /healthz within 60 s, the README's campaign delivered, clean Ctrl-C
	@PARLEY_NATS_SERVER=$(NATS_SERVER) bash deploy/local/run-check.sh

.PHONY: bench-gateway
# Private servers on ports 8521-8524 (BENCH_GATEWAY_FLAGS=-port-base N moves
# them; -shared runs on the shared local servers instead).
bench-gateway: $(NATS_SERVER) ## load test: the floor, the gateway without and with group commit, at 64 and 1 connections, 10 and 1000 contacts (req/s, p50, p99, CPU per request by process, batches per stream message; fails on any answer but 202, a rate-limit fallback or a missed target)
	@cd testkit/system && go run ./cmd/gateway-bench -nats-server $(NATS_SERVER) $(BENCH_GATEWAY_FLAGS)

# README "Benchmarks" quotes its figures. Private servers on ports 8511-8514
# (NATS_KILL_FLAGS=-port-base N moves them).
.PHONY: bench-gateway-nats-kill
bench-gateway-nats-kill: $(NATS_SERVER) ## load on the gateway, SIGKILL its private nats-server mid-run, restart it on its store: every batch id answered 202 must be in the stream (prints 202s, others by status, found/missing)
	@cd testkit/system && go run ./cmd/gateway-bench nats-kill -nats-server $(NATS_SERVER) $(NATS_KILL_FLAGS)

# docs/capacity.md quotes its figures. Private servers on ports 8501-8504
# (CAPACITY_FLAGS=-port-base N moves them).
.PHONY: capacity
capacity: $(NATS_SERVER) ## CPU per gateway request, campaign message and automation trigger, by process; PostgreSQL writes and WAL per message (private NATS, Redis, PostgreSQL; docs/capacity.md)
	@cd testkit/system && go run ./cmd/gateway-bench capacity -nats-server $(NATS_SERVER) $(CAPACITY_FLAGS)

.PHONY: bench-revoke
bench-revoke: ## revoke-to-401: three gateways under load, keys revoked via the admin API (p50, p99, max per gateway; target < 100 ms), then with the broadcast lost (bounded by the cache TTL)
	@cd testkit/system && go run ./cmd/gateway-bench revoke

# Crash drills (testkit/system/campaign/drill_test.go, on the shared
# harness testkit/drillenv): the real campaign dispatcher and provider-sim with 10,000
# messages in flight; each breaks one part and counts per recipient at
# provider-sim (testkit/drilltally): it fails on any accepted phone never
# received, any failed message it did not provoke, or duplicated sends beyond
# the sends unrecorded at a kill.
DRILL := cd testkit/system && go test -tags drill -count=1 -v -timeout 5m

.PHONY: drill-dispatcher-kill drill-nats-restart drill-postgres-outage drills
drill-dispatcher-kill: ## drill: SIGKILL the dispatcher with 10,000 messages in flight, restart it (prints lost and duplicated)
	@$(DRILL) -run '^TestDrillDispatcherKill$$' ./campaign/
drill-nats-restart: ## drill: stop NATS for 3 s mid-run (prints lost and duplicated)
	@$(DRILL) -run '^TestDrillNATSRestart$$' ./campaign/
drill-postgres-outage: ## drill: stop a private PostgreSQL cluster for 5 s mid-run (prints lost and duplicated)
	@$(DRILL) -run '^TestDrillPostgresOutage$$' ./campaign/
drills: ## all three drills, about 30 s each
	@$(DRILL) -run '^TestDrill' ./campaign/

# WhatsApp's rules (testkit/system/whatsapp, docs/drills.md): the real
# gateway and dispatchers against provider-sim with its rules set through
# its admin API (pauses and windows scaled by its time factor), counted per
# recipient at provider-sim. Not in .ci/run.
.PHONY: drills-whatsapp
drills-whatsapp: ## drills: a template paused mid-campaign then approved, a template disabled, a portfolio's messaging limit, the pair rate (refusals, held, lost, duplicated at provider-sim; about 3 minutes)
	@cd testkit/system && go test -tags drill -count=1 -v -timeout 10m -run '^TestDrill' ./whatsapp/

# README "Cluster drill" (testkit/system/cluster). Not among make drills.
.PHONY: drill-cluster
drill-cluster: $(NATS_SERVER) ## drill: 3-node JetStream cluster (stream R3), 2 gateways, 2+2 dispatchers; SIGKILL the stream leader, then a dispatcher of each kind (prints lost, duplicated, the 202s/503s of the leader change), then the same on one of each
	@export PARLEY_NATS_SERVER=$(NATS_SERVER); cd testkit/system && go test -tags drill -count=1 -v -timeout 5m -run '^TestClusterDrill$$' ./cluster/

.PHONY: bench-delivery
# The campaign part (testkit/system/campaign/bench_test.go), then the
# automation part (testkit/system/automation/bench_test.go); both run.
bench-delivery: ## load test: the campaign dispatcher against its two naive floors (msg/s ratios, CPU and PostgreSQL writes per message; median of 5 alternating runs), msg/s through one dispatcher (latency 0 and 100 ms), per-account rates (at provider-sim and by send times; fails on any 130429), WhatsApp's rules on against off (pair rate, tier unlimited; fails under 0.95x), automation latency during a backlog
	@rc=0; (cd testkit/system && go test -tags bench -count=1 -v -timeout 20m -run '^TestBenchDelivery' ./campaign/) || rc=1; \
	  (cd testkit/system && go test -tags bench -count=1 -v -timeout 15m -run '^TestBenchDelivery' ./automation/) || rc=1; \
	  exit $$rc

# The first part of bench-delivery alone: the campaign dispatcher against
# its naive floors. FLOOR_RUNS=1 is a quick check (one run, no median).
FLOOR_RUNS ?= 5
.PHONY: bench-delivery-floor
bench-delivery-floor: ## load test: the campaign dispatcher against two naive dispatchers, one keeping Parley's messages row (the target) and one its own outcome table (printed beside it), 20,000 new messages per phase, median of FLOOR_RUNS (5) alternating runs (msg/s and ratios, CPU per message by process, PostgreSQL writes and WAL per message; fails on lost, duplicated or failed sends, or a median ratio to the messages-row floor under 1.0x)
	@cd testkit/system && go test -tags bench -count=1 -v -timeout 15m -run '^TestBenchDelivery$$/^Floor' ./campaign/ -floor-runs=$(FLOOR_RUNS)

# The CSV export (pkg/record/export_bench_test.go): record.Export through
# csvexport to a counter, against the local PostgreSQL.
.PHONY: bench-export
bench-export: ## the CSV export of 1,000,000 messages (50 campaign sends, 50,000 automation triggers): rows/s and the Go heap's peak, sampled every 5 ms (fails on a missing row or a peak of 64 MB)
	@cd pkg && go test -tags bench -count=1 -v -timeout 15m -run '^TestBenchExport$$' ./record/

# PARLEY_DRILL_CONTACTS (50000), PARLEY_DRILL_THROUGHPUT (the account's, 2000/s)
# and PARLEY_DRILL_LATENCY_MS (the simulator's, 50) change the figures.
.PHONY: drill-segment-50k
drill-segment-50k: ## a campaign to a 50,000-contact segment through the gateway, the campaign dispatcher and provider-sim (prints 202 -> last receipt, messages/s)
	@cd services/gateway && go test -tags drill -run '^TestDrillSegment50k$$' -count=1 -timeout 30m -v .

# README "NATS versions and sync_interval" quotes its figures.
.PHONY: bench-nats-sync
bench-nats-sync: $(NATS_SERVER) ## JetStream publish msgs/s and p50/p99 with sync_interval default vs always (the pinned nats-server, file storage)
	@cd testkit/system && go run ./cmd/jetstream-sync-bench -nats-server $(NATS_SERVER)

# Docker Compose, started (docs/operations.md, "Docker Compose"). offline-images is only
# for machines that reach no image registry (this project's): it builds
# stand-ins under the names docker-compose.yml and the Dockerfile use.
.PHONY: offline-images compose-smoke
offline-images: $(NATS_SERVER) ## OFFLINE MACHINES ONLY: build stand-in images (debootstrap Debian, postgres, redis, nats, distroless, golang) under the compose file's names; keeps those whose inputs did not change
	@NATS_SERVER=$(NATS_SERVER) bash deploy/offline-images.sh
# Docker's compose plugin when it has one, else the pinned compose of bin/.
COMPOSE_CMD = $$(if docker compose version >/dev/null 2>&1; then echo "docker compose"; else $(MAKE) -s $(DOCKER_COMPOSE) >&2 && echo $(DOCKER_COMPOSE); fi)
compose-smoke: ## docker compose up --wait, seed, a campaign through the gateway, --scale campaign-dispatcher=3 with 10,000 contacts (0 lost, 0 duplicated at provider-sim), down -v
	@compose="$(COMPOSE_CMD)"; COMPOSE="$$compose" bash deploy/compose-smoke.sh
.PHONY: compose-images
compose-images: ## build compose-smoke's images only (docker compose build)
	@compose="$(COMPOSE_CMD)"; COMPOSE="$$compose" bash deploy/compose-smoke.sh --build-only
# The webhook sender (testkit/system/webhooksender): the real sender,
# campaign dispatcher and provider-sim binaries, the test receiver
# (pkg/webhooks/webhooksim) in the test process; every event the outbox got
# must be received.
WEBHOOK_DRILL := cd testkit/system && go test -tags drill -count=1 -v -timeout 15m

.PHONY: bench-events bench-reports bench-conversations bench-statuses drill-webhook-receiver-down drill-webhook-sender-kill drill-webhook-hanging drills-webhooks
bench-events: ## load test: 20,000-message campaign, one endpoint: events/s through one sender (>= 5,000), change -> receipt p50/p99 (< 1 s), 0 lost
	@cd testkit/system && go test -tags bench -count=1 -v -timeout 15m -run '^TestBenchEvents$$' ./webhooksender/
bench-reports: ## load test: a campaign report over 10,000,000 messages through the real gateway, by day over 30 days and by hour over 7 days (p50, p99, max; fails on a p99 over 300 ms or a total that differs from a count of the messages)
	@cd testkit/system && go test -tags bench -count=1 -v -timeout 30m -run '^TestBenchReports$$' ./reports/
bench-conversations: ## load test: inbound webhooks -> message.received at a test receiver (1,000/s for 60 s: p99 < 1 s, 0 lost, 0 duplicated per wamid), and POST /api/messages -> provider-sim (200/s: p99 < 100 ms, counted per recipient)
	@cd testkit/system && go test -tags bench -count=1 -v -timeout 15m -run '^TestBench(Inbound|Replies)$$' ./webhooksender/
# BENCH_STATUSES_FLAGS: -statuses-rate (10000 a second), -statuses-for (30s),
# -statuses-per-post (50), -statuses-gateway-env (more gateway environment,
# comma separated); one part: BENCH_STATUSES_FLAGS="-run ^TestBenchStatuses$$/^Apply$$".
bench-statuses: ## load test: signed status webhooks (50 a POST, delivered and read, some out of order and duplicated) at 10,000 statuses/s for 30 s through the gateway's group commit, applied alone (no endpoint), then counted at a test receiver (>= 10,000 statuses/s applied, POST -> event p99 < 1 s, 0 lost, 0 duplicated, 0 backwards; CPU, commits and WAL per status)
	@cd testkit/system && go test -tags bench -count=1 -v -timeout 20m -run '^TestBenchStatuses$$' ./webhooksender/ $(BENCH_STATUSES_FLAGS)
drill-webhook-receiver-down: ## drill: the webhook receiver down 60 s during a campaign (prints lost and duplicated)
	@$(WEBHOOK_DRILL) -run '^TestDrillReceiverDown$$' ./webhooksender/
drill-webhook-sender-kill: ## drill: SIGKILL the webhook sender mid-stream, restart it (lost, duplicates vs in flight)
	@$(WEBHOOK_DRILL) -run '^TestDrillSenderKill$$' ./webhooksender/
drill-webhook-hanging: ## drill: one company's endpoint hangs; another's p99 stays under 1 s
	@$(WEBHOOK_DRILL) -run '^TestDrillHangingEndpoint$$' ./webhooksender/
drills-webhooks: ## the three webhook drills, about 4 minutes
	@$(WEBHOOK_DRILL) -run '^TestDrill' ./webhooksender/

