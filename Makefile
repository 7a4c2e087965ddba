# ingestd — the two commands a newcomer needs are `make demo` and `make test`.
GO ?= go
PKGS = $$($(GO) list ./... | grep -v /integration)

.PHONY: demo test unit fuzz integration build stack-up stack-down bench bench-e2e bench-upsert bench-bigtable bench-optimize

demo: ## run three pipelines on an in-process broker and registry; tables land in ./demo-output
	$(GO) run ./cmd/ingestd demo --out demo-output

test: unit fuzz integration ## everything: unit tests, short fuzzing, then the real stack and the integration tests

# staticcheck, pinned; `go run` fetches it from the Go module proxy on first use.
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

unit: ## go vet, staticcheck and the unit tests with -race (no services)
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

fuzz: ## each fuzz target for a short time (seed corpora in ingest/decode/testdata/fuzz; partition paths in deltawriter)
	for t in FuzzDecode FuzzDifferential FuzzProtobuf FuzzJSON FuzzJSONSchema; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $$(case $$t in FuzzDecode) echo 40000x;; *) echo 12000x;; esac) -parallel 1 ./ingest/decode/ || exit 1; done
	$(GO) test -run '^$$' -fuzz '^FuzzPartitionPath$$' -fuzztime 5000x -parallel 1 ./deltawriter/
	$(GO) test -run '^$$' -fuzz '^FuzzDenseSameBytes$$' -fuzztime 1000x -parallel 1 ./deltawriter/parquetenc/

integration: ## needs Java 17+, Maven, Python 3, Go and Node.js; starts Kafka, the registry, the S3/GCS/Azure emulators and PostgreSQL (and resolves the Kafka Connect jars) via scripts/stack.sh
	scripts/venv.sh
	scripts/spark-jars.sh
	scripts/stack.sh up
	$(GO) test -count=1 -v -timeout 45m -parallel 4 ./integration/

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

bench-bigtable: ## Delta tables of 10^4..10^6 live files: snapshot load, refresh, checkpoint, VACUUM dry run, commits and start-up beside delta-rs, one core each; not part of `make test` (SIZES, PARTS, BIG_DIR, …: see scripts/bench-bigtable.sh)
	scripts/bench-bigtable.sh

bench-optimize: ## OPTIMIZE beside delta-rs optimize.compact() on the same tables (1 KB and 200 B rows), CPU s, MB/s per CPU-s, peak RSS, two runs each; not part of `make test` (TABLES, RUNS: see scripts/bench/optimize.py)
	$${PYTHON:-.venv/bin/python} scripts/bench/optimize.py
