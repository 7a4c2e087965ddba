# ingestd — the two commands a newcomer needs are `make demo` and `make test`.
GO ?= go
PKGS = $$($(GO) list ./... | grep -v /integration)

.PHONY: demo test unit integration build stack-up stack-down bench

demo: ## run three pipelines on an in-process broker and registry; tables land in ./demo-output
	$(GO) run ./cmd/ingestd demo --out demo-output

test: unit integration ## everything: unit tests, then the real stack and the integration tests

unit:
	$(GO) vet ./...
	$(GO) test -race -count=1 $(PKGS)

integration: ## needs Java 17+, Maven and Python 3; starts Kafka + registry via scripts/stack.sh
	scripts/venv.sh
	scripts/stack.sh up
	$(GO) test -count=1 -v -timeout 30m ./integration/

build:
	$(GO) build -o ingestd ./cmd/ingestd

stack-up:
	scripts/stack.sh up

stack-down:
	scripts/stack.sh down

bench:
	$(GO) test -run '^$$' -bench . -benchmem -cpu 1 ./ingest/decode/
