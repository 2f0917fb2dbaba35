# Provisioning roles I (kt_preflight, kt_python_env, kt_host_tuning): molecule scenarios in real containers.
# bad-input: every bad input fails preflight and leaves the host unchanged; provision: a site profile with a
# local wheel + tuning, converge -> idempotence -> verify; envs: the real kt-0.7 envs from PyPI (GBs; the
# wheelhouse cache KTINFRA_WHEELHOUSE, default /var/cache/ktinfra/wheelhouse, makes warm runs offline).
# `envs` installs both real kt-0.7 envs (~19 GB) with uv from the wheelhouse: reused when
# KTINFRA_WHEELHOUSE already holds the wheels, filled from PyPI (pip wheel) when it does not; part of
# `make test` since uv made it fit CI's 90 minutes (docs/readme/roles1.md has the measured times).
# envs first: it fills the wheelhouse that roles2's serve scenario and the operate venv read, and `make test`
# runs this lane beside theirs (scripts/test-lanes.sh)
ROLES1_SCENARIOS ?= envs bad-input provision
KTINFRA_WHEELHOUSE ?= /var/cache/ktinfra/wheelhouse
# removing the envs container (~20 GB written) outlasts the docker modules' default 60 s API timeout
ROLES1_DOCKER_TIMEOUT ?= 900

.PHONY: test-roles1 test-roles1-envs bench-roles1-envs

test-roles1: venv ## molecule: preflight bad inputs, provision (local wheel, tuning), the real kt-0.7 envs
	bash scripts/docker-ready.sh
	mkdir -p $(KTINFRA_WHEELHOUSE)
	set -e; for s in $(ROLES1_SCENARIOS); do \
	  echo "== molecule test -s $$s"; \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH DOCKER_TIMEOUT=$(ROLES1_DOCKER_TIMEOUT) KTINFRA_WHEELHOUSE=$(KTINFRA_WHEELHOUSE) $(VENV)/bin/molecule test -s $$s; \
	done

test-roles1-envs: ## molecule envs alone: the real kt-0.7 inference and SFT envs from PyPI (GBs)
	$(MAKE) --no-print-directory test-roles1 ROLES1_SCENARIOS=envs

bench-roles1-envs: venv ## cold + warm converge of the envs scenario, times/changed/sizes -> out/roles1-envs-measure.txt
	bash scripts/docker-ready.sh
	DOCKER_TIMEOUT=$(ROLES1_DOCKER_TIMEOUT) molecule/envs/measure.sh

TEST_TARGETS += test-roles1

.PHONY: host-tuning-containers
TEST_TARGETS += host-tuning-containers

host-tuning-containers: venv docker-ready ## kt_host_tuning in systemd containers: boot-time governor units, governor daemons, read-only /proc/sys, undo
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/test_host_tuning_review5_governor_units.py \
		tests/integration/test_kt_host_tuning_governor_daemons.py \
		tests/integration/test_host_tuning_review6_governor_daemons.py \
		tests/integration/test_kt_host_tuning_governor_config.py \
		tests/integration/test_host_tuning_review5_container_boot_order.py \
		tests/integration/test_kt_host_tuning_undo_container.py
