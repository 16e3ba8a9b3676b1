# nearnative: build, set up, test.
#   sudo make setup   install packages, Go, dockerd, the binary and the workload image
#   sudo make quick   setup, then the quick Redis study with its table
#   sudo make test    setup, then every test (unit and integration, real engine)
#   sudo make bench   the statistical engine's trust benchmarks: the interval
#                     simulation, then A/A, power and injected cost on this
#                     machine (slow: the machine ones take an hour or more)
#   make bench-sim    only the interval simulation (pure CPU, deterministic)
#   sudo make drill   the faults drill: kills, start/stop cycles, queue, store
#                     faults, with the figures for BENCH.md (about 3 hours;
#                     on a quiet machine)
#   sudo make cluster setup, then the local one-node Kubernetes cluster for the
#                     k8s platforms (the first time builds Kubernetes: ~15 min)
#   sudo make testbed setup, then three hosts over SSH on this machine (network
#                     namespaces, an sshd each, a dockerd on the sut) and testbed/hosts.yaml for
#                     `nearnative run redis --quick --hosts testbed/hosts.yaml`
#   sudo make testbed-down  takes them down

SHELL   := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
PKG     := github.com/nearnative/nearnative
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS := -X $(PKG)/internal/version.Version=$(VERSION) -X $(PKG)/internal/version.Commit=$(COMMIT)

.PHONY: build setup quick test test-vm-docker unit bench bench-sim bench-machine vet clean cluster cluster-down test-cluster-down drill testbed testbed-down

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nearnative ./cmd/nearnative

setup:
	./scripts/setup.sh

# The local Kubernetes cluster: setup does not build it. The first `up`
# builds Kubernetes and etcd from the Go module proxy into the state
# directory (about 15 minutes of CPU on two cores); later ones take seconds.
# With the cluster up, `make test` also runs the k8s integration tests.
cluster: setup
	nearnative cluster up

cluster-down:
	nearnative cluster down

# Brings the local cluster up (from the built binaries) with a pod on it,
# takes it down, and checks that nothing is left: processes, mounts, links,
# iptables chains, nftables tables, sysctls, cgroups, directories. The
# cluster must be down before (the test will not take down one in use).
test-cluster-down:
	NEARNATIVE_CLUSTER_UPDOWN=1 $(GO) test -count=1 -v -run TestUpDownLeavesNothing ./internal/cluster/

# The test bed: hosts made of network namespaces on one private bridge, each
# with its own sshd (the sut host also its own dockerd), and testbed/hosts.yaml
# naming them (docs/hosts.md).
testbed: setup
	nearnative testbed up --dir testbed

testbed-down:
	nearnative testbed down --dir testbed

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
	NEARNATIVE_VM_DOCKER_TEST=1 $(GO) test -count=1 -timeout 40m -run 'TestGuestDockerRedis|TestGuestDockerOnHost' -v ./internal/platforms/vm/

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

# The faults drill (issue 24): 20 SIGKILLs of `run redis --quick` at random
# moments, each followed by a run that must reap and complete; 100 start/stop
# cycles of a server on each platform (no leak, flat memory); three runs
# queued within a second; the result store failing briefly and for good, on
# SQLite (a full file system) and PostgreSQL (the server stopped). `make
# test` runs a short version of each. Its figures, appended to
# drill-results.md, are BENCH.md's "Faults drill" section: run it on a quiet
# machine. NEARNATIVE_DRILL_KILLS, _CYCLES, _QUEUE and _STUDY shorten it.
drill: setup
	rm -f drill-results.md
	NEARNATIVE_DRILL=1 NEARNATIVE_DRILL_OUT=$(CURDIR)/drill-results.md $(GO) test -count=1 -v -timeout 6h -run '^TestDrill' ./e2e/

clean:
	rm -rf bin
