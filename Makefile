# Netplay toolkit. `make up` and `make test` are all a newcomer needs; both start with `deps`.
SHELL := /bin/bash
SWIFT ?= swift
SWIFT_FLAGS ?=
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path 2>/dev/null)
CC ?= cc
# What building and running the cluster needs.
APT_PACKAGES = libzmq3-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler pkg-config python3 python3-protobuf libsodium-dev libsqlite3-dev
# What the tests and benchmarks need on top: real emulator cores, cc65 for the test ROM,
# a real RetroArch LAN host inside network namespaces (iproute2), the real-path WAN harness
# (iproute2, iptables' statistic match, TUN devices), Prometheus + promtool,
# headless Chromium for the dashboard screenshot test, docker-compose to validate compose/,
# kubectl (kubernetes-client: `kubectl kustomize`) and a Python venv for kubernetes-validate to
# validate compose/kubernetes/.
# Debian's kubectl is kubernetes-client; a machine that already has a kubectl (another package
# owns /usr/bin/kubectl) keeps it.
KUBECTL_PACKAGE = $(if $(shell command -v kubectl 2>/dev/null),,kubernetes-client)
APT_TEST_PACKAGES = libretro-nestopia cc65 retroarch iproute2 iptables prometheus chromium docker-compose $(KUBECTL_PACKAGE) python3-venv

.PHONY: deps deps-test apt-install build release test proto proto-check bench bench-c clean help image-check k8s-check

help:
	@echo "make up      install what is missing, build, start the local cluster"
	@echo "make test    install what is missing, build, run every test"
	@echo "make deps    install system packages (apt-get) when missing"
	@echo "make build   debug build;  make release: release build"
	@echo "make proto   regenerate protobuf-c C and Swift from proto/"
	@echo "make bench   print performance figures (release build)"
	@echo "make down    stop a cluster started with make up-detached"
	@echo "make demo    play a visible two-player match through the local cluster"
	@echo "make run-SERVICE  run one service alone with debug logs (e.g. make run-discovery)"
	@echo "make clean   remove build products"

## deps: install the Debian packages the build needs, only when something is missing.
deps:
	@$(MAKE) -s apt-install PACKAGES="$(APT_PACKAGES)"
	@command -v $(SWIFT) >/dev/null || { echo "deps: no swift toolchain on PATH (need Swift 6.1 or later)" >&2; exit 1; }

## deps-test: deps plus what the tests and benchmarks use.
deps-test: deps
	@$(MAKE) -s apt-install PACKAGES="$(APT_TEST_PACKAGES)"

apt-install:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "deps: installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO=sudo; else \
	    echo "deps: missing$$missing; run as root: apt-get update && apt-get install -y$$missing" >&2; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq$$missing >/dev/null || { \
	    echo "deps: apt-get failed; run: sudo apt-get update && sudo apt-get install -y$$missing" >&2; exit 1; }; \
	fi

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

release: deps
	$(SWIFT) build -c release $(SWIFT_FLAGS)

## test: the whole suite: unit, property, fuzz, end-to-end over real processes on loopback;
## then, alone (it checks timings), real-path play across network namespaces (WANPlayTests).
test: deps-test proto-check
	@$(MAKE) --no-print-directory k8s-check
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	SWIFT=$(SWIFT) tools/check-image.sh --debug
	SWIFT=$(SWIFT) tools/run-tests.sh .build/test-logs/suite.log --skip-build --skip WANPlayTests $(SWIFT_FLAGS)
	SWIFT=$(SWIFT) tools/run-tests.sh .build/test-logs/wan.log --skip-build --filter WANPlayTests $(SWIFT_FLAGS)

## image-check: compose/Dockerfile checked without a container engine: its executables are
## Package.swift's, its build stage installs APT_PACKAGES, its runtime stage exactly the packages
## whose libraries the static-stdlib release binaries load (tools/check-image.sh). `make test`
## runs the same check on the debug binaries it builds for the tests (--debug: the Swift runtime
## they load from the toolchain passed over), which saves CI a release build of every executable.
image-check: deps
	tools/check-image.sh

## k8s-check: compose/kubernetes/ (base and overlay) render with `kubectl kustomize` and pass
## kubernetes-validate (installed into .build/k8s-venv on first use) (tools/check-k8s.sh).
k8s-check:
	@$(MAKE) -s apt-install PACKAGES="$(KUBECTL_PACKAGE) python3-venv"
	tools/check-k8s.sh

print-%:
	@echo $($*)

## proto: regenerate the committed protobuf-c sources and the Swift wire types.
proto: deps
	tools/gen-proto.sh

## proto-check: fail when the committed generated code is stale.
proto-check: deps
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; tools/gen-proto.sh --out $$tmp >/dev/null && \
	  diff -r -q $$tmp/Sources/CNetplayProto Sources/CNetplayProto >/dev/null && \
	  diff -r -q $$tmp/Sources/NetplayWire/Generated Sources/NetplayWire/Generated >/dev/null && \
	  diff -r -q $$tmp/Tests/NetplayWireTests/Generated Tests/NetplayWireTests/Generated >/dev/null || \
	  { echo "proto-check: generated code is stale: run 'make proto' and commit the result" >&2; exit 1; }

Benchmarks/bin/zmq_bench: Benchmarks/c/zmq_bench.c
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -o $@ $< -lzmq

Benchmarks/bin/libretro_bench: Benchmarks/c/libretro_bench.c Sources/CLibretro/include/nlr_host.h Sources/CLibretro/include/nlr_libretro_api.h
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -ISources/CLibretro/include -o $@ $< -ldl

bench-c: Benchmarks/bin/zmq_bench Benchmarks/bin/libretro_bench

## bench: release build, then every benchmark prints its figures beside its target.
bench: deps-test bench-c
	$(SWIFT) build -c release $(SWIFT_FLAGS)
	$(RELEASE_BIN)/netplay-bench zeromq --c-bench Benchmarks/bin/zmq_bench
	$(RELEASE_BIN)/netplay-bench rollback --all-players
	$(RELEASE_BIN)/netplay-bench controlplane
	$(RELEASE_BIN)/netplay-bench cluster
	$(RELEASE_BIN)/netplay-bench libretro --c-bench Benchmarks/bin/libretro_bench
	$(RELEASE_BIN)/netplay-bench wan
	@$(MAKE) --no-print-directory bench-relay
	@$(MAKE) --no-print-directory bench-retroarch

clean:
	rm -rf .build Benchmarks/bin

## ---- Operations: the local cluster (netplay-supervisor with compose/cluster.yaml) ----------
## Variables: CLUSTER_CONFIG (cluster file), RUN_DIR (pid file and logs), SYNC_REPLICAS (relay
## replicas), NETPLAY_PORT_OFFSET (shift every port: a second cluster), NETPLAY_BIN_DIR (use
## these binaries instead of building release ones), ARGS (extra flags for run-SERVICE).
CLUSTER_CONFIG ?= compose/cluster.yaml
RUN_DIR ?= run
UP_BIN = $(if $(NETPLAY_BIN_DIR),$(NETPLAY_BIN_DIR),$(RELEASE_BIN))
DEBUG_BIN = $(shell $(SWIFT) build --show-bin-path 2>/dev/null)
OPS_APT_PACKAGES = prometheus chromium docker-compose
UP_ENV = $(if $(SYNC_REPLICAS),SYNC_REPLICAS=$(SYNC_REPLICAS))

.PHONY: up up-detached down run-% deps-ops

## up: install what is missing, build release binaries, run the cluster in the foreground.
## Ctrl-C stops every service in reverse order. `SYNC_REPLICAS=3 make up` runs three relays.
up: deps $(if $(NETPLAY_BIN_DIR),,release)
	@mkdir -p $(RUN_DIR)
	$(UP_ENV) exec $(UP_BIN)/netplay-supervisor --config $(CLUSTER_CONFIG) --run-dir $(RUN_DIR) --bin-dir $(UP_BIN)

## up-detached: like up, in the background (output in RUN_DIR/supervisor.out); returns once
## the cluster is ready. Stop it with `make down`.
up-detached: deps $(if $(NETPLAY_BIN_DIR),,release)
	@mkdir -p $(RUN_DIR)
	@$(UP_ENV) nohup $(UP_BIN)/netplay-supervisor --config $(CLUSTER_CONFIG) --run-dir $(RUN_DIR) --bin-dir $(UP_BIN) \
	  > $(RUN_DIR)/supervisor.out 2>&1 & \
	for i in $$(seq 1 600); do \
	  if grep -q "cluster ready" $(RUN_DIR)/supervisor.out 2>/dev/null; then echo "cluster ready (pid $$(cat $(RUN_DIR)/supervisor.pid); logs in $(RUN_DIR)/); make down stops it"; exit 0; fi; \
	  if ! kill -0 $$! 2>/dev/null; then tail -5 $(RUN_DIR)/supervisor.out >&2; exit 1; fi; \
	  sleep 0.1; \
	done; echo "up-detached: not ready after 60 s; see $(RUN_DIR)/supervisor.out" >&2; exit 1

## down: stop a cluster started in the background (SIGTERM to the supervisor in RUN_DIR).
down:
	@pidfile=$(RUN_DIR)/supervisor.pid; \
	if [ ! -f $$pidfile ]; then echo "down: no cluster running from $(RUN_DIR)/"; exit 0; fi; \
	pid=$$(cat $$pidfile); \
	if ! kill -0 $$pid 2>/dev/null; then echo "down: stale $$pidfile (pid $$pid is gone)"; rm -f $$pidfile; exit 0; fi; \
	kill -TERM $$pid; \
	for i in $$(seq 1 600); do kill -0 $$pid 2>/dev/null || { echo "down: cluster stopped (supervisor pid $$pid)"; exit 0; }; sleep 0.1; done; \
	echo "down: supervisor $$pid still running after 60 s" >&2; exit 1

## run-SERVICE: build and run one service alone with debug logs (make run-discovery ARGS=...).
run-%: deps
	$(SWIFT) build --product netplay-$* $(SWIFT_FLAGS)
	exec $(DEBUG_BIN)/netplay-$* --log-level debug $(ARGS)

## deps-ops: the Debian tools the operations tests use (Prometheus, Chromium, docker-compose).
deps-ops:
	@$(MAKE) -s apt-install PACKAGES="$(OPS_APT_PACKAGES)"

# ---- Data plane: the relay demo and its C baselines ----
.PHONY: demo bench-relay

## demo: a visible two-player match through the local cluster (`make up` if it runs; otherwise
## discovery, a coordinator and a relay are started for the demo), with HUD stats.
demo: build
	$(DEBUG_BIN)/netplay-peer demo

Benchmarks/bin/relay_forwarder: Benchmarks/c/relay_forwarder.c
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -o $@ $< -lzmq

Benchmarks/bin/relay_load: Benchmarks/c/relay_load.c
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -o $@ $< -lpthread

## bench-relay: the relay under 1,000 two-player sessions at 60 Hz beside the C ROUTER forwarder.
bench-relay: deps Benchmarks/bin/relay_forwarder Benchmarks/bin/relay_load
	$(SWIFT) build -c release --product netplay-sync $(SWIFT_FLAGS)
	$(SWIFT) build -c release --product netplay-bench $(SWIFT_FLAGS)
	$(RELEASE_BIN)/netplay-bench relay --c-forwarder Benchmarks/bin/relay_forwarder --load Benchmarks/bin/relay_load

# ---- RetroArch relay: the tunnel beside a plain C TCP forwarder ----
.PHONY: bench-retroarch

Benchmarks/bin/tcp_forwarder: Benchmarks/c/tcp_forwarder.c
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -o $@ $<

Benchmarks/bin/retroarch_load: Benchmarks/c/retroarch_load.c
	@mkdir -p Benchmarks/bin
	$(CC) -O2 -Wall -Wextra -o $@ $<

## bench-retroarch: 100 RetroArch sessions through netplay-sync's tunnel, the C forwarder and
## straight, interleaved: throughput and added round-trip p99.
bench-retroarch: deps Benchmarks/bin/tcp_forwarder Benchmarks/bin/retroarch_load
	$(SWIFT) build -c release --product netplay-sync $(SWIFT_FLAGS)
	$(SWIFT) build -c release --product netplay-bench $(SWIFT_FLAGS)
	$(RELEASE_BIN)/netplay-bench retroarch --c-forwarder Benchmarks/bin/tcp_forwarder --load Benchmarks/bin/retroarch_load
