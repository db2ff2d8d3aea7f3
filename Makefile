# Developer shortcuts; each target is a thin wrapper over scripts/, which is
# what the README and CI use.
.PHONY: help deps build run test unit fuzz soak arm64 clean

help: ## list the targets
	@grep -E '^[a-z0-9]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

deps: ## install the Debian packages vfleet needs (root)
	scripts/deps.sh

build: ## build bin/vfleet and the static bin/vfleet-agent (and bin/vfleet-agent-ARCH for every VM guest arch)
	scripts/build.sh

run: ## install, build, make the guest image and run the default scenario (root)
	scripts/quickstart.sh

test: ## the whole suite, integration tests included (root)
	scripts/test.sh

unit: ## only the tests that need neither root nor the guest image
	go test -short ./...

fuzz: ## every fuzz target in turn, a million executions each (FUZZTIME=10m: a duration)
	scripts/fuzz.sh $(FUZZTIME)

soak: ## SOAK=100 runs in a row (success, failed step, SIGINT, SIGKILL+clean), counting leaks (root)
	VFLEET_SOAK=$(or $(SOAK),100) go test -count=1 -run '^TestSoak$$' -v -timeout 3h ./cmd/vfleet

arm64: ## boot an arm64 guest under emulation and run cpu in it; builds vfleet's arm64 image first (~7 min once) (root)
	VFLEET_TEST_ARM64=1 go test -count=1 -run 'Arm64' -v -timeout 40m ./internal/guest/qemu

clean: ## remove what killed runs left behind, and the built binaries
	-bin/vfleet clean
	rm -rf bin
