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
