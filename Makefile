MODULES := pkg $(wildcard services/*)

.PHONY: test
test:
	@set -e; for m in $(MODULES); do echo "== $$m"; (cd $$m && go test -race -count=1 ./...); done
