# nearnative: build, set up, test.
#   sudo make setup   install packages, Go, dockerd, the binary and the workload image
#   sudo make quick   setup, then the quick Redis study with its table
#   sudo make test    setup, then every test (unit and integration, real engine)
#   sudo make bench   the statistical engine's trust benchmarks: the interval
#                     simulation, then A/A, power and injected cost on this
#                     machine (slow: the machine ones take an hour or more)
#   make bench-sim    only the interval simulation (pure CPU, deterministic)

SHELL   := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
PKG     := github.com/nearnative/nearnative
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -X $(PKG)/internal/version.Version=$(VERSION) -X $(PKG)/internal/version.Commit=$(COMMIT)

.PHONY: build setup quick test test-vm-docker unit bench bench-sim bench-machine vet clean

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nearnative ./cmd/nearnative

setup:
	./scripts/setup.sh

quick: setup
	nearnative run redis --quick

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal studies e2e bench apps)" || { gofmt -l cmd internal studies e2e bench apps; echo 'gofmt needed'; exit 1; }

# Unit and integration tests; integration tests use the real Docker engine,
# real servers and the workload image that setup builds.
test: setup vet
	$(GO) test -count=1 -timeout 25m ./...

# The vm-docker guest test: minutes under TCG (disk build, dockerd boot).
test-vm-docker: setup
	NEARNATIVE_VM_DOCKER_TEST=1 $(GO) test -count=1 -timeout 40m -run TestGuestDockerRedis -v ./internal/platform/vm/

# Only the tests that need nothing installed.
unit:
	$(GO) test -count=1 -short ./...

bench: bench-sim bench-machine

# The simulation behind the choice of interval method (BENCH.md): pure
# CPU, deterministic from its seeds, about 10 minutes on 2 cores.
bench-sim:
	$(GO) test -count=1 -run '^$$' -bench Intervals -benchtime 1x -timeout 3h ./bench/intervals/

# A/A, power and injected cost: real runs of the built binary on this
# machine (they take the measuring lock, so run them on a quiet machine).
bench-machine: setup
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 240m ./bench/

clean:
	rm -rf bin
