# Netplay toolkit. `make up` and `make test` are all a newcomer needs; both start with `deps`.
SHELL := /bin/bash
SWIFT ?= swift
SWIFT_FLAGS ?=
RELEASE_BIN = $(shell $(SWIFT) build -c release --show-bin-path 2>/dev/null)
CC ?= cc
# What building and running the cluster needs.
APT_PACKAGES = libzmq3-dev libprotobuf-c-dev protobuf-c-compiler pkg-config python3
# What the tests and benchmarks need on top: real emulator cores, cc65 for the test ROM.
APT_TEST_PACKAGES = libretro-nestopia cc65

.PHONY: deps deps-test apt-install build release test proto proto-check bench bench-c clean help

help:
	@echo "make up      install what is missing, build, start the local cluster"
	@echo "make test    install what is missing, build, run every test"
	@echo "make deps    install system packages (apt-get) when missing"
	@echo "make build   debug build;  make release: release build"
	@echo "make proto   regenerate protobuf-c C and Swift from proto/"
	@echo "make bench   print performance figures (release build)"
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

## test: the whole suite: unit, property, fuzz, end-to-end over real processes on loopback.
test: deps-test proto-check
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build $(SWIFT_FLAGS)

## proto: regenerate the committed protobuf-c sources and the Swift wire types.
proto: deps
	tools/gen-proto.sh

## proto-check: fail when the committed generated code is stale.
proto-check: deps
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; tools/gen-proto.sh --out $$tmp >/dev/null && \
	  diff -r -q $$tmp/Sources/CNetplayProto Sources/CNetplayProto >/dev/null && \
	  diff -r -q $$tmp/Sources/NetplayWire/Generated Sources/NetplayWire/Generated >/dev/null || \
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
	$(SWIFT) build -c release --product netplay-bench $(SWIFT_FLAGS)
	$(RELEASE_BIN)/netplay-bench zeromq --c-bench Benchmarks/bin/zmq_bench
	$(RELEASE_BIN)/netplay-bench rollback
	$(RELEASE_BIN)/netplay-bench libretro --c-bench Benchmarks/bin/libretro_bench

clean:
	rm -rf .build Benchmarks/bin
