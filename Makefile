# gpuscale: the two-command setup. `make run` and `make check` install what is missing first.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory
CMAKE_FLAGS ?=

.PHONY: all deps build run check test unit e2e asan valgrind format checksrc bench clean image

all: build

deps:
	@bash scripts/install-deps.sh

build:
	@cmake -S . -B $(BUILD) -DGPUSCALE_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Start the agent on the built-in mock scenario (4 GPUs), gRPC :6000, HTTP :9400.
run: deps build
	@bash scripts/run-demo.sh $(BUILD)/gpuscale

# Every test: source checks, unit + fuzz replay + end-to-end (ctest), the unit tests under
# valgrind, then every test again under ASan+UBSan.
check: deps checksrc build
	@ctest --test-dir $(BUILD) --output-on-failure
	@$(MAKE) --no-print-directory valgrind
	@$(MAKE) --no-print-directory asan

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

bench: deps build
	@bash bench/run.sh $(BUILD)

# The container image (Dockerfile). Needs Docker or another builder with a daemon: not available on the
# project's CI machines, where scripts/validate-deploy.sh lints the Dockerfile offline instead.
IMAGE ?= gpuscale:$(shell grep -o -m1 'gpuscale VERSION [0-9.]*' CMakeLists.txt | cut -d' ' -f3)
DOCKER ?= docker
image:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make image: $(DOCKER) not found (set DOCKER=podman, or build where Docker runs)" >&2; exit 1; }
	$(DOCKER) build -t $(IMAGE) .

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
