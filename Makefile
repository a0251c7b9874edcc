# quorum: make demo runs the demo job, make test runs the tests.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# -s -w leave out the symbol table and DWARF (120 MB -> 88 MB); panics keep
# their stack traces.
LDFLAGS := -s -w -X github.com/quorumsql/quorum/internal/version.Version=$(VERSION)
DEMO    := examples/demo
# REDOCLY lints docs/openapi.yaml; make deps installs it, pinned, with npm.
REDOCLY_VERSION := 2.77.0
REDOCLY := bin/redocly-$(REDOCLY_VERSION)/node_modules/.bin/redocly
GOLD    := $(DEMO)/evaluation_suite/gold

.PHONY: all build demo check test slow deps deps-demo race race-pkgs leak plain bench chaos lint generate clean deploy-check jaeger web-vendor fuzz staticcheck

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/quorum ./cmd/quorum

# demo runs ReFoRCE over the bundled demo dataset through quorum run (an
# embedded NATS server, a local redis-server, every role in one process; the
# simulated LLM unless OPENAI_API_KEY / --llm-base-url point at a real one)
# and scores the answers with the Spider 2.0 evaluator. It installs only
# redis-server.
demo: deps-demo build
	./bin/quorum inspect --strict $(DEMO)
	rm -rf out/demo
	./bin/quorum run --dataset $(DEMO) --run-id demo --out out/demo 2>out-demo.log || { tail -20 out-demo.log; exit 1; }
	./bin/quorum eval --gold $(GOLD) --pred out/demo | tail -1

# APT installs a Debian package, waiting up to 5 minutes for another apt-get
# holding the dpkg lock instead of failing at once.
APT = SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends

# jaeger builds Jaeger all-in-one (v2, an OpenTelemetry Collector
# distribution) into bin/jaeger from the Go module proxy. Its version and
# dependencies are pinned by the tool module tools/jaeger, so none of them
# enter quorum's go.mod. internal/testutil/jaegertest runs it.
JAEGER := bin/jaeger
jaeger: $(JAEGER)
$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	@echo "building Jaeger (tools/jaeger, pinned) into $@: the first build takes minutes"
	cd tools/jaeger && GOFLAGS= GOWORK=off $(GO) build -o ../../$@ github.com/jaegertracing/jaeger/cmd/jaeger

# deps-demo installs what the demo needs: redis-server (quorum run starts
# one when no --redis-url is given).
deps-demo:
	@command -v redis-server >/dev/null 2>&1 || { \
		echo "installing redis-server (Debian package): the demo's local Redis"; \
		$(APT) redis-server >/dev/null 2>&1 || \
		{ SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; $$SUDO apt-get -o DPkg::Lock::Timeout=300 update >/dev/null && $(APT) redis-server; }; \
	}
	@command -v redis-server >/dev/null 2>&1 || { echo "redis-server is required: apt-get install -y redis-server"; exit 1; }

# deps installs what the tests need when it is missing: redis-server, which
# the rate-limit and runtime tests start on a free port, (best effort)
# chromium, which renders report.html and the question page in the browser
# tests, Jaeger (best effort; the tests build it on demand too), which the
# OpenTelemetry tests export spans to, and redocly (npm, pinned), which
# lints docs/openapi.yaml.
deps: deps-demo
	@$(MAKE) --no-print-directory jaeger || echo "Jaeger not built: the tests against it will be skipped"
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
		echo "installing chromium (Debian package): the browser tests of report.html and the question page"; \
		$(APT) chromium >/dev/null 2>&1 || \
		{ SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; $$SUDO apt-get -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 && $(APT) chromium >/dev/null 2>&1; } || \
		echo "chromium not installed: the browser tests will be skipped"; \
	}
	@[ -x $(REDOCLY) ] || { command -v npm >/dev/null 2>&1 && \
		echo "installing @redocly/cli@$(REDOCLY_VERSION) (npm, into bin/): lints docs/openapi.yaml" && \
		npm install --silent --no-audit --no-fund --prefix bin/redocly-$(REDOCLY_VERSION) @redocly/cli@$(REDOCLY_VERSION) >/dev/null; } || \
		echo "npm not found: docs/openapi.yaml is not linted (internal/app/serve's OpenAPI tests still parse it)"

# web-vendor fetches the question page's charting library again (the
# pinned npm package, checked against the registry's integrity by npm
# pack) and checks it is byte for byte the vendored copy the binary embeds
# (internal/app/serve/web/vendor/PIN); to upgrade, change the version
# there and copy the new files in.
WEB_VENDOR := internal/app/serve/web/vendor
web-vendor:
	@pkg=$$(sed -n 's/^package \([^ ]*\).*/\1/p' $(WEB_VENDOR)/PIN); tmp=$$(mktemp -d); \
	(cd $$tmp && npm pack --silent $$pkg >/dev/null && tar xzf *.tgz) && \
	cp $$tmp/package/dist/uPlot.iife.min.js $$tmp/package/dist/uPlot.min.css $$tmp/ && cp $$tmp/package/LICENSE $$tmp/LICENSE.uPlot && \
	(cd $$tmp && grep -v '^#\|^package' $(CURDIR)/$(WEB_VENDOR)/PIN | sha256sum -c -) && rm -rf $$tmp && echo "$$pkg: the vendored copy is the package's"

# RACE are the packages with concurrency: make test runs each of them once,
# under the race detector; every other package once, plain (PLAIN). The
# roles (internal/runtime/...) renew leases, fetch and vote in goroutines of
# their own.
MODULE := github.com/quorumsql/quorum
RACE   := internal/service internal/rdb pkg/warehouse pkg/eval internal/ratelimit pkg/llm \
	pkg/llmsim pkg/agents internal/queue pkg/runtime internal/runtime internal/warehouse internal/app/serve
empty  :=
space  := $(empty) $(empty)
RACE_PKGS  = $(addprefix ./,$(addsuffix /...,$(RACE)))
PLAIN_PKGS = $(shell $(GO) list ./... | grep -vE '^$(MODULE)/($(subst $(space),|,$(RACE)))(/|$$)')
# LEAK starts and stops every role process 20 times and finds no goroutine
# left: it runs once, in the race step.
LEAK := TestClusterRoleProcessesLeaveNoGoroutine
# NORACE are tests of the RACE packages that compute over data in one
# goroutine (every gold query through a persona, 1.5 MB hostile CSVs, long
# tokenizer runs, 64 MiB of rows read by SQLite, which is Go code too,
# every draw sequence of the sampling rule enumerated) or
# compare whole runs' decisions (the agents' adaptive sampling, which
# plain runs over the whole demo, not the subset they take under race):
# the race detector makes them 3-15x slower and checks nothing their
# packages' concurrent tests (TestSeamThroughTheSimulator, the runtime's)
# do not. The race step skips them and the plain step runs them in
# NORACE_PKGS, so each runs once (a name that matches nothing runs under
# race, as before); internal/layout checks that every name is a test of
# NORACE_PKGS.
NORACE_PKGS := ./pkg/eval/ ./pkg/llm/ ./pkg/llmsim/ ./pkg/agents/dbinfo/ ./pkg/agents/raise/ \
	./pkg/agents/pexa/ ./pkg/agents/reforce/ ./pkg/warehouse/sqlite/ ./pkg/agents/sampling/
NORACE := TestHostileCSVIsBounded TestStructuralSpider2LiteSubset TestCountingLongRunsIsLinear \
	TestTrajectoryThroughTheSimulator TestPersonaForms TestRAISETrajectories TestPersonaKeepsTheAnswer \
	TestCanonicalGolden TestPExATestcase TestRAISEColumns TestEnvelopesForms \
	TestPersonaConversationKeepsTheAnswer TestPExAPlannerNoProposer TestRAISEAgentCommandsBound \
	TestRAISERamble TestPExAEndToEnd TestRAISEFinalCoverage TestPersonasReadByTheReader \
	TestRAISETrajectoryUnderPersonas TestEnvelopeCommands TestPExAPlanner TestPExAMostPromising \
	TestRAISECommandForms TestCanonicalPersonaIsCanonical TestLongTextsCountedInChunks \
	TestAdaptiveSamplingPasses TestAdaptiveSamplingRounds TestAdaptiveSamplingWaves \
	TestHostileResultsAreCut TestSureNeverChangesTheDecision
NORACE_RE = ^($(subst $(space),|,$(strip $(NORACE))))$$

# check is the fast tier, for every change: gofmt, vet, the layout rules and
# every test that starts no server, process, browser or long experiment
# (go test -short skips those; internal/testutil/tier). With a warm build
# cache it takes under 3 minutes on 2 cores.
check: lint
	$(GO) test -short -timeout 10m ./...

# staticcheck runs the pinned staticcheck (installed into bin/ from the
# module proxy) over the tree: 0 findings expected, each deliberate use of
# a deprecated API marked //lint:ignore with its reason. Not in make test:
# a cold run costs minutes of CI's two cores.
STATICCHECK_VERSION := v0.8.2
bin/staticcheck-$(STATICCHECK_VERSION):
	GOBIN=$(CURDIR)/bin/staticcheck-$(STATICCHECK_VERSION).d $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/staticcheck-$(STATICCHECK_VERSION).d/staticcheck $@ && rmdir bin/staticcheck-$(STATICCHECK_VERSION).d
staticcheck: bin/staticcheck-$(STATICCHECK_VERSION)
	./bin/staticcheck-$(STATICCHECK_VERSION) ./...

# test runs five steps in two lanes at once, each step even when an
# earlier one failed: the race detector over the packages with concurrency
# (race), then the leak test under it (leak), beside go test over those
# without (plain), then the deploy files' check and the reader's fuzz
# targets (fuzz). The race lane is CPU
# bound; the plain lane's longest package (e2e) mostly waits on its
# processes, so side by side they finish well before one after the other.
# The tests that run quorum as a process (e2e's roles, internal/cli's)
# share bin/quorum, built once (QUORUM_TEST_BIN), instead of linking
# their own. Every package runs once (a line per package as it finishes; the roles'
# JSON logs are kept out). Its last lines give each step's outcome and the
# ten slowest packages; it fails if any step fails.
test: deps lint build
	@bash -c 'start=$$(date +%s); dir=$$(mktemp -d); export QUORUM_TEST_BIN=$(CURDIR)/bin/quorum; \
	  step() { name=$$1; lane=$$2; shift 2; s=$$(date +%s); \
	    { "$$@" 2>&1; echo "$$?" >$$dir/$$lane.rc; } | grep --line-buffered -vE "^\{\"level\"|^redis: " | tee -a $$dir/log; \
	    r=$$(cat $$dir/$$lane.rc); if [ "$$r" = 0 ]; then o=ok; else o="FAILED (exit $$r)"; fi; \
	    echo "$$name $$o in $$(( $$(date +%s) - s ))s;" >>$$dir/$$lane.steps; }; \
	  { step "go test:" plain $(MAKE) --no-print-directory plain; \
	    step "deploy-check:" plain $(MAKE) --no-print-directory deploy-check; \
	    step "fuzz:" plain $(MAKE) --no-print-directory fuzz; } & \
	  { step "race:" race $(MAKE) --no-print-directory race-pkgs; \
	    step "leak:" race $(MAKE) --no-print-directory leak; }; wait; \
	  ok=$$(grep -c "^ok " $$dir/log); failed=$$(grep -c "^FAIL	" $$dir/log); \
	  echo "slowest packages:"; grep -E "^(ok|FAIL)[[:space:]]" $$dir/log | awk -F"\t" "{t=\$$3; sub(/s\$$/, \"\", t); printf \"  %8.1fs  %s\\n\", t, \$$2}" | sort -rn | head -10; \
	  rc=0; grep -q FAILED $$dir/*.steps && rc=1; \
	  echo "make test: $$ok package runs ok, $$failed failed, in $$(( $$(date +%s) - start ))s; steps: $$(cat $$dir/plain.steps $$dir/race.steps | tr "\n" " ")"; \
	  rm -rf $$dir; exit $$rc'

# plain runs the packages without concurrency once, without the race
# detector (20 minutes a package, as a loaded machine runs internal/cli 2-3x
# slower).
plain:
	$(GO) test -count=1 -timeout 20m -skip '^$(LEAK)$$' $(PLAIN_PKGS)
	$(GO) test -count=1 -timeout 20m -run '$(NORACE_RE)' $(NORACE_PKGS)

# fuzz runs the reply reader's fuzz targets for a bounded time each (make
# test): envelopes composed around every gold query must give the query
# back, and arbitrary bytes must not panic. FUZZTIME longer finds more.
# A count of inputs, not a duration: Go 1.26's coordinator can fail a
# target with "context deadline exceeded" when a duration ends under load
# (golang/go#75804, fixed in 1.27), and a count ends when its work is done.
FUZZTIME ?= 20000x
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./pkg/reply/
	$(GO) test -run '^$$' -fuzz '^FuzzReaderNoPanic$$' -fuzztime $(FUZZTIME) ./pkg/reply/

# deploy-check decodes the Kubernetes manifests strictly into the Kubernetes
# and KEDA API types, loads docker-compose.yml with the compose-spec loader
# and checks the Grafana dashboard's metrics (its own module: KEDA's
# dependencies stay out of quorum's binaries).
deploy-check:
	cd deploy/check && $(GO) vet ./... && $(GO) test -count=1 ./...

# race runs the race detector on the packages with concurrency, and the
# test that starts and stops every role process 20 times and finds no
# goroutine left.
race: race-pkgs leak

race-pkgs:
	$(GO) test -count=1 -timeout 20m -race -skip '$(NORACE_RE)' $(RACE_PKGS)

leak:
	$(GO) test -count=1 -race -run '^$(LEAK)$$' ./internal/cli/

# slow runs what make test leaves out, for whoever changes those areas: the
# packages with concurrency once more without the race detector (the
# experiments the race detector's slowness cuts to a subset run whole
# there: raceEnabled), the timing experiments and rate figures
# (QUORUM_SLOW; pkg/outputs: the report page's time to interactive;
# internal/cli: no 429 from three endpoints behind their quotas), serve's
# 2,000-question cancel soak and cancel cycles (1,000 in process, 2,000
# through the binary; QUORUM_SOAK, QUORUM_CANCEL_CYCLES), and the long
# chaos scenarios (make chaos).
slow: deps
	QUORUM_SLOW=1 QUORUM_SOAK=1 QUORUM_CANCEL_CYCLES=1000 $(GO) test -count=1 -timeout 30m $(RACE_PKGS) ./internal/app/bench/ ./pkg/outputs/
	QUORUM_SLOW=1 QUORUM_CANCEL_CYCLES=2000 $(GO) test -count=1 -timeout 20m -run '^(TestRAISEOnThreeEndpoints|TestServeCancelsLeaveNothing)$$' ./internal/cli/
	$(MAKE) --no-print-directory chaos

# bench runs the standard scenario (Spider 2.0's size, 547 examples x 8
# candidates, against the simulated LLM allowing 3,000 requests a minute,
# plus the scaling runs) and the microbenchmarks. Results: out/bench/.
bench: deps build
	./bin/quorum bench --out out/bench
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/... | tee out/bench/microbenchmarks.txt

# chaos runs the long chaos scenarios (make test runs the short ones). For
# ReFoRCE, PExA, RAISE and the ensemble: every role a process over a
# nats-server process and redis-server with AOF, the LLM answering 5xx and
# hanging at random, workers SIGKILLed while a task is in flight and the
# voter over and over, Redis down 40 s, NATS and the coordinator SIGKILLed
# and restarted. Over a three-node JetStream cluster (R3 streams) and Redis
# with a replica and three sentinels: the stream leader SIGKILLed three
# times and the Redis primary once. A generator partitioned from NATS and
# Redis mid-task and healed. Answers must equal an undisturbed run's.
chaos: deps
	QUORUM_CHAOS_LONG=1 $(GO) test -count=1 -run 'TestChaos|TestClusterChaos|TestWorkerPartition' -v -timeout 30m ./e2e

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ -x $(REDOCLY) ]; then $(REDOCLY) lint --format=summary docs/openapi.yaml; else echo "redocly not installed (make deps): docs/openapi.yaml not linted"; fi

# generate rebuilds the demo dataset from its deterministic generator.
generate:
	$(GO) generate ./examples/demo/...

clean:
	rm -rf bin
