# replaybus — developer commands. `make test` is the README's test command
# and what .ci/run runs.

GO ?= go
# Every package of every module of the repository: go.work puts them in one
# workspace, and the module-path pattern (unlike ./...) crosses module
# boundaries. The modules: the library (.), and the parts with heavy
# dependencies that a library user must not inherit.
PKGS ?= github.com/replaybus/replaybus/...
MODULES := . adapters/nats bench e2e examples metrics tools

.PHONY: test lint bench e2e e2e-deps run property property-many browser-faults browser-build aisdk-resume

## test: every test, with the race detector (the e2e tests need node, npm ci in e2e/node, chromium and curl; they skip without them unless CI is set).
## go test's own output (ok and FAIL lines, failing tests' output), then the skipped tests and why (internal/testsummary runs go test -json)
test:
	$(GO) run ./internal/testsummary -go $(GO) -race -count=1 -timeout 20m $(PKGS)

## lint: gofmt must have nothing to say, every module must be tidy (go mod tidy -diff), go vet and staticcheck must pass
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do (cd $$m && GOWORK=off $(GO) mod tidy -diff) || { echo "go mod tidy -diff: module $$m is not tidy"; exit 1; }; done
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

## property: the long property-test run — every TestProperty* of eventbus (the delivery model, turns,
## turns across three nodes with node deaths, and parallel publishers) with PROPERTY_CHECKS cases each
## (default 10,000; CI runs 1,000, and 200 of the three-node one), under the race detector
PROPERTY_CHECKS ?= 10000
property:
	$(GO) test -race -count=1 -timeout 60m -run '^TestProperty' -v github.com/replaybus/replaybus/eventbus -rapid.checks=$(PROPERTY_CHECKS) -property.nodechecks=$(PROPERTY_CHECKS)

## property-many: the long run of adapters/nats TestPropertyManySessions — one SSE connection over 100
## sessions, publishers on two NATS nodes (embedded nats-server), random cuts (resumed on either node with
## the last id: line), adds and removes — with PROPERTY_CHECKS cases (default 10,000; make test runs 10)
property-many:
	cd adapters/nats && $(GO) test -count=1 -timeout 90m -run '^TestPropertyManySessions$$' -v . -rapid.checks=$(PROPERTY_CHECKS)

## browser-faults: the browser module's seeded fault run in headless Chromium (e2e TestBrowserFaultRun):
## BROWSER_FAULTS faults (default 1,000) over BROWSER_TABS tabs of one origin (default 4); BROWSER_SEED=0
## picks a new seed, which the test prints; make test runs 13 (one of each kind)
BROWSER_FAULTS ?= 1000
BROWSER_TABS ?= 4
BROWSER_SEED ?= 0
browser-faults:
	CI=$${CI:-1} $(GO) test -count=1 -timeout 90m -run '^TestBrowserFaultRun$$' -v github.com/replaybus/replaybus/e2e \
		-browser.faults=$(BROWSER_FAULTS) -browser.tabs=$(BROWSER_TABS) -browser.seed=$(BROWSER_SEED)

## aisdk-resume: npm ai 7 against the example server's /api/chat (e2e TestAISDKClientCutsAndResumesTurns):
## AISDK_TURNS seeded turns (default 100) of 500-2,000 text deltas and a tool call, each read whole and,
## in another chat, cut at a random chunk and resumed with reconnectToStream; AISDK_SEED=0 picks a new
## seed, which the test prints; make test runs 5
AISDK_TURNS ?= 100
AISDK_SEED ?= 0
aisdk-resume:
	CI=$${CI:-1} $(GO) test -count=1 -timeout 60m -run '^TestAISDKClientCutsAndResumesTurns$$' -v github.com/replaybus/replaybus/e2e \
		-aisdk.turns=$(AISDK_TURNS) -aisdk.seed=$(AISDK_SEED)

## browser-build: regenerate adapters/browser/replaybus.min.js (the module as served) from the readable
## replaybus.js with the esbuild pinned in adapters/browser/build/package-lock.json; commit both
browser-build:
	cd adapters/browser/build && npm ci --no-audit --no-fund && npm run -s build

## bench: all benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## e2e-deps: install the pinned npm packages for the Node.js tests (eventsource and ws; the Durable Streams conformance suite and client; the frontend protocols' clients: ai, @ag-ui/client, @a2a-js/sdk, @durable-streams/aisdk-transport)
e2e-deps:
	cd e2e/node && npm ci --no-audit --no-fund
	cd e2e/durable && npm ci --no-audit --no-fund
	cd e2e/frontends && npm ci --no-audit --no-fund
	cd adapters/browser/build && npm ci --no-audit --no-fund

## e2e: the real-client tests only (Node.js eventsource and ws, the frontend protocols' npm clients, Chromium, curl); missing clients fail
e2e: e2e-deps
	CI=$${CI:-1} $(GO) test -race -count=1 -v github.com/replaybus/replaybus/e2e

## run: the example server with its demo on :8080
run:
	$(GO) run ./examples/agentserver -demo
