# gpuscale: the two-command setup. `make run` and `make check` install what is missing first, each only
# what it needs (scripts/install-deps.sh holds the package lists: build, run, test, bench).
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=

.PHONY: all deps build run install uninstall check test unit e2e asan valgrind format checksrc bench clean image

all: build

# Every package: build, try-it, test and bench tools.
deps:
	@bash scripts/install-deps.sh build run test bench

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
# tests under valgrind, then every test again under ASan+UBSan; one summary line per stage at the end,
# non-zero exit when any failed. The deploy validation needs the npm registry (see the README).
check:
	@bash scripts/install-deps.sh build run test
	@bash scripts/check.sh $(BUILD) $(ASAN_BUILD) $(JOBS)

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
	  $(BUILD)/bench/streams-gateway-scale.txt $(BUILD)/bench/soak.txt

# The container image (Dockerfile). Needs Docker or another builder with a daemon: not available on the
# project's CI machines, where scripts/validate-deploy.sh lints the Dockerfile offline instead.
IMAGE ?= gpuscale:$(shell grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)
DOCKER ?= docker
image:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make image: $(DOCKER) not found (set DOCKER=podman, or build where Docker runs)" >&2; exit 1; }
	$(DOCKER) build -t $(IMAGE) .

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
