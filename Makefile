# ingestd — the two commands a newcomer needs are `make demo` and `make test`.
GO ?= go
PKGS = $$($(GO) list ./... | grep -v /integration)

.PHONY: demo test unit fuzz integration stack-ready build stack-up stack-down bench bench-e2e bench-upsert bench-bigtable bench-optimize bench-cdc

demo: ## run three pipelines on an in-process broker and registry; tables land in ./demo-output
	$(GO) run ./cmd/ingestd demo --out demo-output

# The stack's preparation (venv, Maven jars, services: mostly downloads, builds and JVM
# start-ups) runs in the background while unit and fuzz run, so the integration tests start
# as soon as both are done. Its output goes to STACK_LOG and is printed after unit and fuzz;
# a failure of either fails `make test` (after both have ended).
STACK_LOG = .stack/stack-ready.log
INTEGRATION_TEST = $(GO) test -count=1 -v -timeout 45m -parallel 4 ./integration/

test: ## everything: unit tests and short fuzzing while the real stack is prepared, then the integration tests
	@mkdir -p .stack
	@echo "make stack-ready runs in the background (output: $(STACK_LOG), printed after unit and fuzz)"
	@( $(MAKE) --no-print-directory stack-ready > $(STACK_LOG) 2>&1 ) & prep=$$!; \
	  checks=0; $(MAKE) --no-print-directory unit fuzz || checks=$$?; \
	  ready=0; wait $$prep || ready=$$?; \
	  echo "---- make stack-ready (exit status $$ready) ----"; cat $(STACK_LOG); echo "----"; \
	  [ $$checks -eq 0 ] && [ $$ready -eq 0 ]
	$(INTEGRATION_TEST)

# staticcheck, pinned; `go run` fetches it from the Go module proxy on first use.
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

unit: ## go vet, staticcheck and the unit tests with -race (no services)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

fuzz: ## each fuzz target for a short time (seed corpora in ingest/decode/testdata/fuzz; partition paths in deltawriter)
	for t in FuzzDecode FuzzDifferential FuzzProtobuf FuzzProtobufDirect FuzzJSON FuzzJSONDirect FuzzJSONSchema FuzzJSONSchemaFast; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $$(case $$t in FuzzDecode) echo 40000x;; *) echo 12000x;; esac) -parallel 1 ./ingest/decode/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzPartitionPath$$' -fuzztime 5000x -parallel 1 ./deltawriter/
	$(GO) test -run '^$$' -fuzz '^FuzzDenseSameBytes$$' -fuzztime 1000x -parallel 1 ./deltawriter/parquetenc/

integration: stack-ready ## needs Java 17+, Maven, Python 3, Go and Node.js; starts Kafka, the registry, the S3/GCS/Azure emulators and PostgreSQL (and resolves the Kafka Connect jars) via scripts/stack.sh
	$(INTEGRATION_TEST)

stack-ready: ## what the integration tests need: the Python venv, the Delta jars and the running stack
	scripts/venv.sh
	scripts/spark-jars.sh
	scripts/stack.sh up

build:
	$(GO) build -o ingestd ./cmd/ingestd

stack-up:
	scripts/stack.sh up

stack-down:
	scripts/stack.sh down

bench: ## B1: the decoder beside hamba/avro's map and struct paths, one core
	GOMAXPROCS=1 $(GO) test -run '^$$' -bench 'B1|Formats' -benchmem -cpu 1 ./ingest/decode/

bench-e2e: ## Kafka → Delta end to end: a consume-only baseline, ingestd (GOMAXPROCS=1, 2) and kafka-delta-ingest (KDI_SRC=its source tarball or checkout) on the same topic; not part of `make test` (N, P, SIZES, …: see scripts/bench-e2e.sh and docs/performance.md)
	scripts/bench-e2e.sh

bench-upsert: ## upserts into a table of 10 M rows: ingestd beside an append baseline, delta-rs merge and Spark MERGE on the same batches; not part of `make test` (ROWS_LIST, BATCH, PEERS, PHASES, …: see scripts/bench-upsert.sh)
	scripts/bench-upsert.sh

bench-cdc: ## PostgreSQL → Debezium (Kafka Connect) → ingestd → Delta on the stack: a source table of 1 M rows, a steady and a flat-out change workload (SNAPSHOT=initial: its snapshot first); changes/s, CPU per change of the Connect worker (the baseline) and of ingestd, commit → visible lag, and a delta-rs check against the source; not part of `make test` (ROWS, RATE, DURATION, …: see scripts/bench-cdc.sh)
	scripts/bench-cdc.sh

bench-bigtable: ## Delta tables of 10^4..10^6 live files: snapshot load, refresh, checkpoint, VACUUM dry run, commits and start-up beside delta-rs, one core each; not part of `make test` (SIZES, PARTS, BIG_DIR, STORE=s3 for the S3 emulator, …: see scripts/bench-bigtable.sh)
	scripts/bench-bigtable.sh

bench-optimize: ## OPTIMIZE beside delta-rs optimize.compact() on the same tables (1 KB and 200 B rows), CPU s, MB/s per CPU-s, peak RSS, two runs each; not part of `make test` (TABLES, RUNS: see scripts/bench/optimize.py)
	$${PYTHON:-.venv/bin/python} scripts/bench/optimize.py
