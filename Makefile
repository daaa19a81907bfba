MODULES := pkg $(wildcard services/*)

.PHONY: test
test:
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && go test -race -count=1 ./...); done

# Build everything, start PostgreSQL/Redis/NATS if stopped, migrate, seed the
# demo company, and run every service until Ctrl-C (deploy/local/run.sh).
.PHONY: run
run:
	@bash deploy/local/run.sh

# make run on private ports, NATS and Redis, with a throwaway database: the
# demo key and every /healthz within 60 s, a clean Ctrl-C, and a service that
# fails at start stopping the rest. Takes about a minute.
.PHONY: run-check
run-check:
	@bash deploy/local/run-check.sh

# Crash drills: the real campaign dispatcher and provider-sim with 10,000
# messages in flight; each breaks one part (SIGKILL of the dispatcher, a NATS
# restart, a PostgreSQL outage on a private cluster) and fails on any accepted
# contact without exactly one terminal state or on sends beyond the
# duplicate window. About 30 s each.
DRILL := cd services/campaign-dispatcher && go test -tags drill -count=1 -v -timeout 5m

.PHONY: drill-dispatcher-kill drill-nats-restart drill-postgres-outage drills
drill-dispatcher-kill:
	$(DRILL) -run '^TestDrillDispatcherKill$$' .
drill-nats-restart:
	$(DRILL) -run '^TestDrillNATSRestart$$' .
drill-postgres-outage:
	$(DRILL) -run '^TestDrillPostgresOutage$$' .
drills:
	$(DRILL) -run '^TestDrill' .

# Delivery throughput and latency through one dispatcher instance (see
# pkg/delivery/README.md): prints messages/s, per-account rates and the
# automation trigger's latency during a campaign backlog.
.PHONY: bench-delivery
bench-delivery:
	cd services/campaign-dispatcher && go test -tags bench -count=1 -v -timeout 15m -run '^TestBenchDelivery' .
