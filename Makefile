# pushreporter — build, test and run. A fresh clone needs only `make run` or `make test`.
SHELL := /bin/bash
PREFIX ?= /usr/local
DESTDIR ?=
SWIFT ?= swift
CONFIG ?= examples
DEB_PACKAGES := libyaml-dev libcurl4-openssl-dev libsqlite3-dev libpq-dev postgresql pkg-config python3-yaml python3-jsonschema
# What make deb needs beyond the build: dpkg-deb and dpkg-shlibdeps, objcopy and strip.
DEB_TOOLS := dpkg-dev binutils
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
RELEASE_FLAGS := -c release --static-swift-stdlib
BIN_DEBUG := .build/debug/pushreporter
BIN_RELEASE := .build/release/pushreporter

.PHONY: all deps deb-tools build release run test bench fuzz fuzz-ci install deb deb-check clean

all: build

## deps: install the Debian packages the build links against, when they are missing.
deps:
	@$(MAKE) --no-print-directory install-missing PACKAGES="$(DEB_PACKAGES)"

deb-tools:
	@$(MAKE) --no-print-directory install-missing PACKAGES="$(DEB_TOOLS)"

install-missing:
	@missing=""; for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS) --product pushreporter

## run: validate the examples, then report their accounts to a demo receiver on 127.0.0.1.
run: build
	$(BIN_DEBUG) validate --config $(CONFIG)
	bash scripts/demo.sh

## test: the whole test suite (unit, golden, property and end-to-end tests of the binary).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build --disable-xctest

## bench: release-mode figures beside their references (see bench/README.md).
bench: deps
	bash bench/run.sh

## bench-compare: BASE (a commit; HEAD~1 when not given) against this checkout, in turns:
## validate, preview, run --once and the agent's start (bench/README.md).
bench-compare: deps
	bash bench/compare.sh $(BASE)

## fuzz: a few minutes of libFuzzer on the template parser, the loader and the HTTP request parser.
fuzz: deps
	bash fuzz/run.sh

## fuzz-ci: 30 s of each fuzz target and the kept regressions, as CI runs them after the tests.
fuzz-ci: deps
	FUZZ_SECONDS=30 bash fuzz/run.sh

## install: the release binary, the templates, the systemd unit (paths rewritten to PREFIX),
## the Type=notify-reload drop-in (to copy by hand on systemd 253+), the man page, the
## configuration's JSON Schema and the bash, zsh and fish completions. The release build takes some minutes (docs/deploying.md).
install: release
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/pushreporter/templates \
	  $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/share/pushreporter/systemd \
	  $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 0755 $(BIN_RELEASE) $(DESTDIR)$(PREFIX)/bin/pushreporter
	install -m 0644 templates/*.yaml $(DESTDIR)$(PREFIX)/share/pushreporter/templates/
	sed 's#/usr/local/#$(PREFIX)/#g' examples/pushreporter.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/pushreporter.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/pushreporter.service
	install -m 0644 examples/pushreporter-notify-reload.conf $(DESTDIR)$(PREFIX)/share/pushreporter/systemd/notify-reload.conf
	install -m 0644 docs/pushreporter.1 $(DESTDIR)$(PREFIX)/share/man/man1/pushreporter.1
	$(BIN_RELEASE) schema --output $(DESTDIR)$(PREFIX)/share/pushreporter/schema.json
	chmod 0644 $(DESTDIR)$(PREFIX)/share/pushreporter/schema.json
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions \
	  $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
	$(BIN_RELEASE) --generate-completion-script bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/pushreporter
	$(BIN_RELEASE) --generate-completion-script zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_pushreporter
	$(BIN_RELEASE) --generate-completion-script fish > $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/pushreporter.fish

## deb: dist/pushreporter_VERSION_ARCH.deb (SPEC §13) and its debug symbols beside it (.ddeb).
deb: release deb-tools
	bash packaging/deb.sh $(BIN_RELEASE)

## deb-check: build the package, then check its contents, install, upgrade, remove and purge
## (in a scratch dpkg root; the machine's own is untouched).
deb-check: deb
	bash packaging/check-deb.sh

clean:
	rm -rf .build .build-fuzz .build-bench bench/out dist
