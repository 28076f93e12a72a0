# gpuscale: the two-command setup. `make run` and `make check` install what is missing first, each only
# what it needs (scripts/install-deps.sh holds the package lists: build, run, test, bench).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=

.PHONY: all deps build run demo install uninstall check test unit e2e asan valgrind format checksrc bench clean image release

all: build

# Every package: build, try-it, test and bench tools.
deps:
	@bash scripts/install-deps.sh build run demo test bench

build:
	@cmake -S . -B $(BUILD) -DGPUSCALE_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Start the agent on the built-in mock scenario (4 GPUs), gRPC :6000, HTTP :9400. Installs and builds
# only what the agent needs (no test tools, no test binaries).
run:
	@bash scripts/install-deps.sh build run
	@cmake -S . -B $(BUILD) -DGPUSCALE_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gpuscale
	@bash scripts/run-demo.sh $(BUILD)/gpuscale

# Engine scaling without a cluster: an agent on 4 mock GPUs and a gateway, on 127.0.0.1, with fake vLLM,
# SGLang and Triton pods whose load rises and falls (docs/demo.md). Prints the query lines with its ports;
# Ctrl-C stops everything. DEMO_FLAGS passes flags (--period 60, --keep).
DEMO_FLAGS ?=
demo:
	@bash scripts/install-deps.sh build run demo
	@cmake -S . -B $(BUILD) -DGPUSCALE_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gpuscale
	@/usr/bin/python3 scripts/demo.py --bin $(BUILD)/gpuscale $(DEMO_FLAGS)

# Installs the binary as $(DESTDIR)$(PREFIX)/bin/gpuscale (default /usr/local/bin/gpuscale), so that
# `gpuscale` works from any directory. Builds only the binary, as `make run` does.
PREFIX ?= /usr/local
install:
	@bash scripts/install-deps.sh build
	@cmake -S . -B $(BUILD) -DGPUSCALE_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target gpuscale
	@install -D -m 0755 $(BUILD)/gpuscale $(DESTDIR)$(PREFIX)/bin/gpuscale
	@echo "installed $(DESTDIR)$(PREFIX)/bin/gpuscale"

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/gpuscale

# Every test, every stage even after one fails (scripts/check.sh): the source checks (checksrc: banned
# calls, over-long functions, clang-format), build, ctest (unit, fuzz replay, end-to-end), the deploy validation, the unit
# tests under valgrind, the container image (scripts/image-check.sh: built with podman, no daemon or registry,
# and the chart's agent, gateway and rightsize run from it; as root), a release into a temporary directory
# (scripts/release-check.sh: sums, chart versions, image labels; it reuses the image stage's image), then every
# test again under ASan+UBSan;
# one summary line per stage at the end, non-zero exit when any failed. The deploy validation needs the npm
# registry (see the README), the image stage the Debian mirror. Where containers cannot run, the image stage
# says why and fails; `make check SKIP_IMAGE=1` skips it, saying so (docs/development.md).
SKIP_IMAGE ?= 0
check:
	@bash scripts/install-deps.sh build run test release $(if $(filter 1,$(SKIP_IMAGE)),,image)
	@SKIP_IMAGE=$(SKIP_IMAGE) bash scripts/check.sh $(BUILD) $(ASAN_BUILD) $(JOBS)

unit: build
	@ctest --test-dir $(BUILD) --output-on-failure -L 'unit|fuzz'

e2e: build
	@ctest --test-dir $(BUILD) --output-on-failure -L e2e

asan:
	@cmake -S . -B $(ASAN_BUILD) -DGPUSCALE_WERROR=ON -DGPUSCALE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		ctest --test-dir $(ASAN_BUILD) --output-on-failure

valgrind: build
	@bash scripts/valgrind-unit.sh $(BUILD)

checksrc:
	@bash scripts/checksrc.sh

format:
	@clang-format -i $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c' 'tests/*.h' 'bench/*.c')

bench:
	@bash scripts/install-deps.sh build bench
	@$(MAKE) --no-print-directory build
	@mkdir -p $(BUILD)/bench
	@bash bench/run.sh $(BUILD) >$(BUILD)/bench/run.txt
	@bash bench/streams.sh --rows $(BUILD) >$(BUILD)/bench/streams.txt
	@bash bench/streams.sh --rows gateway $(BUILD) >$(BUILD)/bench/streams-gateway.txt
	@bash bench/streams.sh --rows gateway-scale $(BUILD) >$(BUILD)/bench/streams-gateway-scale.txt
	@bash bench/soak.sh --rows both $(BUILD) >$(BUILD)/bench/soak.txt
	@bash bench/collect.sh $(BUILD)/bench/bench.json $(BUILD)/bench/run.txt \
	  $(BUILD)/bench/streams.txt $(BUILD)/bench/streams-gateway.txt \
	  $(BUILD)/bench/streams-gateway-scale.txt $(BUILD)/bench/soak.txt \
	  $(wildcard $(BUILD)/bench/image.txt)

# The container image (Dockerfile), built with docker (when its daemon answers), podman or buildah, whichever
# is present (IMAGE_TOOL=... picks one); it says which. No daemon or registry needed: without a registry the
# Debian base images are made with debuerreotype (DEBIAN_IMAGE=REF uses REF and REF-slim instead).
# scripts/image.sh; docs/install.md says how to push it and what image.repository must then say.
IMAGE ?= gpuscale:$(shell grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)
image:
	@IMAGE=$(IMAGE) bash scripts/image.sh build

# A release into dist/VERSION/ (RELEASE_DIR= changes it): the image as an OCI archive (and in the local store),
# the chart packaged with version and appVersion VERSION, an SPDX SBOM of the image, release notes from
# CHANGELOG.md and SHA256SUMS. scripts/release.sh (RELEASE_ARGS=--no-image: the chart alone;
# --allow-dirty: from a tree with uncommitted changes); docs/install.md#installing-a-release.
RELEASE_DIR ?= dist/$(VERSION)
RELEASE_ARGS ?=
release:
	@test -n "$(VERSION)" || { echo "usage: make release VERSION=x.y.z" >&2; exit 2; }
	@bash scripts/install-deps.sh release $(if $(filter --no-image,$(RELEASE_ARGS)),,image)
	@bash scripts/release.sh $(VERSION) --out $(RELEASE_DIR) $(RELEASE_ARGS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
