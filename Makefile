# make test is the one command that checks everything: formatting, vet, staticcheck, the
# complexity bound, the test image, then every test with the race detector. It stops at the first failure.
# docs/testing.md explains the environment variables, labels and cleanup rules.

GO ?= go
STATICCHECK_VERSION := v0.8.2
FUZZTIME ?= 5m

# Targets run one after another, in the order given, even under make -j.
.NOTPARALLEL:
.PHONY: run console-screenshot test scale test-times fmt-check vet staticcheck cyclo jaeger images fuzz bench engine install

# make run plays a scripted agent against the local Docker engine (engine demo), printing the
# operator console's URL first; the console stays up CONSOLE_LINGER after the agent is done.
CONSOLE_LINGER ?= 2m
run: images
	$(GO) run ./cmd/engine demo --console-linger $(CONSOLE_LINGER)

# The tests run in one pass over every package, with the race detector. go test's 10-minute
# default deadline is lifted: a hang still ends, with every goroutine's stack, at TEST_TIMEOUT.
# gotestsum runs go test and keeps its go test -json stream in TEST_TIMES; make test-times
# reports from it. go test runs as many packages at once as the machine has cores (its -p
# default): on this two-core machine -p 2 ran the suite 1.42x faster than -p 1 (docs/testing.md,
# "Run times").
TEST_TIMEOUT ?= 40m
TEST_TIMES ?= $(CURDIR)/.test-times
GOTESTSUM_VERSION := v1.13.0
GOTESTSUM = $(GO) run gotest.tools/gotestsum@$(GOTESTSUM_VERSION)
#
# go test starts packages in the order it is given them, ./... adding the rest alphabetically:
# the longest (make test-times) are named first, so that neither core idles at the end while
# one long package that started last runs alone (on two cores, 1,474 s of tests in that order
# against 2,545 s of package time).
TEST_FIRST := ./integration/egress ./integration/files ./integration/cluster ./integration/service \
	./integration/lifecycle ./integration/hosttools ./integration/fingerprint ./docker ./cmd/engine \
	./integration/process ./integration/console ./service ./integration/snapshot ./integration/telemetry
test: fmt-check vet staticcheck cyclo jaeger images
	@rm -rf "$(TEST_TIMES)" && mkdir -p "$(TEST_TIMES)"
	$(GOTESTSUM) --format standard-quiet --jsonfile "$(TEST_TIMES)/test.json" -- -race -count=1 -timeout $(TEST_TIMEOUT) $(TEST_FIRST) ./...

# scale is the release check (docs/testing.md, "make scale"): the two heaviest egress tests in
# full, with the daemon to themselves (250 allowlisted sandboxes at once; 200 egress windows
# across engine deaths and a NATS restart; make test runs both at a size that still proves
# each one's property), then engine bench's scale curve.
SCALE_TIMEOUT ?= 90m
scale: images
	MAF_SANDBOX_SCALE=full $(GO) test -race -count=1 -timeout $(SCALE_TIMEOUT) -v -run 'TestEgressAtScale$$' ./integration/egress
	MAF_SANDBOX_SCALE=full $(GO) test -race -count=1 -timeout $(SCALE_TIMEOUT) -v -run 'TestProcessesAcrossManySandboxes$$' ./integration/process
	$(GO) run ./cmd/engine bench --scale

# console-screenshot refreshes docs/console.png: the operator console under a little load, in
# headless chromium (integration/console, TestConsoleScreenshot; needs Docker and chromium).
console-screenshot:
	MAF_SANDBOX_REQUIRE_DOCKER=1 MAF_SANDBOX_CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png $(GO) test -count=1 -run 'TestConsoleScreenshot$$' ./integration/console

# test-times prints each package's time and the ten slowest tests of the last make test.
test-times:
	@$(GO) run ./internal/testtimes/cmd/testtimes -n 10 "$(TEST_TIMES)"/*.json

# gofmt -l over the tracked Go files must print nothing.
fmt-check:
	@out=$$(git ls-files -z -- '*.go' | xargs -0 -r "$$($(GO) env GOROOT)/bin/gofmt" -l); \
	if [ -n "$$out" ]; then echo "gofmt -l lists files that need formatting:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# Uses staticcheck from PATH; otherwise the pinned version, installed into GOBIN (or
# GOPATH/bin) when it is not there yet.
staticcheck:
	@sc=$$(command -v staticcheck || true); \
	if [ -z "$$sc" ]; then \
		bin=$$($(GO) env GOBIN); \
		[ -n "$$bin" ] || bin=$$($(GO) env GOPATH | cut -d: -f1)/bin; \
		sc=$$bin/staticcheck; \
		if [ ! -x "$$sc" ]; then \
			echo "installing staticcheck $(STATICCHECK_VERSION) into $$bin"; \
			$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || exit 1; \
		fi; \
	fi; \
	echo "$$sc ./..."; "$$sc" ./...

# No function outside the tests may be over cyclomatic complexity 20: past that a function is
# split, so each part reads on its own. gocyclo lists the offenders and fails.
GOCYCLO_VERSION := v0.6.0
cyclo:
	@$(GO) run github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION) -over 20 -ignore '_test' . || \
		{ echo "gocyclo failed: split each function listed above (over cyclomatic complexity 20)"; exit 1; }

# jaeger builds Jaeger's all-in-one binary (the real OTLP receiver and trace store the trace
# test of integration/telemetry exports to) from the Go module proxy into GOBIN (or
# GOPATH/bin), once: it is built in a throwaway module under TMPDIR, so none of its code or
# its module graph enters this repository. Several minutes on a clean machine.
JAEGER_VERSION := v1.75.0
jaeger:
	@bin=$$($(GO) env GOBIN); [ -n "$$bin" ] || bin=$$($(GO) env GOPATH | cut -d: -f1)/bin; \
	if [ -x "$$bin/jaeger" ]; then echo "jaeger: $$bin/jaeger"; exit 0; fi; \
	echo "building jaeger $(JAEGER_VERSION) into $$bin"; \
	dir=$$(mktemp -d) && cd "$$dir" && $(GO) mod init maf-sandbox-jaeger-build >/dev/null 2>&1 && \
	$(GO) get -tool github.com/jaegertracing/jaeger/cmd/jaeger@$(JAEGER_VERSION) && \
	$(GO) build -o "$$bin/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger; \
	status=$$?; rm -rf "$$dir"; exit $$status

# engine builds the engine binary as an installer would, at ENGINE_BIN (default ./engine), with
# the static binaries of the egress proxy and of the fingerprint observer for
# PROXY_GOOS/PROXY_GOARCH (default linux and this machine's architecture: the daemon's platform)
# embedded, so that "engine images build" needs neither this source tree nor a Go toolchain.
# The binaries are laid over internal/images/embedded with go build -overlay: the tree is never
# written, and a plain go build embeds nothing. The engine is stamped with the checkout's VCS
# revision (BUILDVCS=false turns that off), which "engine version" reports.
ENGINE_BIN ?= engine
BUILDVCS ?= auto
PROXY_GOOS ?= linux
PROXY_GOARCH ?= $(shell $(GO) env GOARCH)
engine:
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	proxy=maf-egress-proxy-$(PROXY_GOOS)-$(PROXY_GOARCH); \
	observer=maf-fingerprint-observer-$(PROXY_GOOS)-$(PROXY_GOARCH); \
	gate=maf-sandbox-gate-$(PROXY_GOOS)-$(PROXY_GOARCH); \
	execd=maf-sandbox-execd-$(PROXY_GOOS)-$(PROXY_GOARCH); \
	CGO_ENABLED=0 GOOS=$(PROXY_GOOS) GOARCH=$(PROXY_GOARCH) $(GO) build -trimpath -ldflags='-s -w' -o "$$tmp/$$proxy" ./cmd/proxy; \
	CGO_ENABLED=0 GOOS=$(PROXY_GOOS) GOARCH=$(PROXY_GOARCH) $(GO) build -trimpath -ldflags='-s -w' -o "$$tmp/$$observer" ./cmd/observer; \
	CGO_ENABLED=0 GOOS=$(PROXY_GOOS) GOARCH=$(PROXY_GOARCH) $(GO) build -trimpath -ldflags='-s -w' -o "$$tmp/$$gate" ./cmd/gate; \
	CGO_ENABLED=0 GOOS=$(PROXY_GOOS) GOARCH=$(PROXY_GOARCH) $(GO) build -trimpath -ldflags='-s -w' -o "$$tmp/$$execd" ./cmd/execd; \
	printf '{"Replace":{"%s":"%s","%s":"%s","%s":"%s","%s":"%s"}}\n' \
		"$(CURDIR)/internal/images/embedded/$$proxy" "$$tmp/$$proxy" \
		"$(CURDIR)/internal/images/embedded/$$observer" "$$tmp/$$observer" \
		"$(CURDIR)/internal/images/embedded/$$gate" "$$tmp/$$gate" \
		"$(CURDIR)/internal/images/embedded/$$execd" "$$tmp/$$execd" > "$$tmp/overlay.json"; \
	$(GO) build -buildvcs=$(BUILDVCS) -overlay "$$tmp/overlay.json" -o "$(ENGINE_BIN)" ./cmd/engine; \
	echo "built $(ENGINE_BIN), embedding the egress proxy, the workload gate, the exec supervisor and the fingerprint observer for $(PROXY_GOOS)/$(PROXY_GOARCH)"

# install puts that binary at $(DESTDIR)$(PREFIX)/bin/engine.
PREFIX ?= /usr/local
install: engine
	install -D -m 0755 "$(ENGINE_BIN)" "$(DESTDIR)$(PREFIX)/bin/engine"

# Builds the images the tests run (the busybox workload image) unless the engine has them.
images:
	$(GO) run ./internal/images/cmd/buildimages

# Measures every engine operation (docs/benchmarks.md).
bench: images
	$(GO) run ./cmd/engine bench

# Fuzzes the guest-path confinement for FUZZTIME (default 5m).
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzConfineResolve -fuzztime $(FUZZTIME) ./sandbox/paths
