# Image builds (issue 4): `make image` bakes the KT image with Packer through ktinfra; `make image-test` is
# the CI stage (real packer, real docker build of the reduced smoke profile, verify).
IMAGE_PROFILE ?= kt-0.7
IMAGE_SOURCE ?= docker
IMAGE_REPO ?= ktinfra/kt
IMAGE_PLAYBOOK ?= playbooks/image.yml
IMAGE_ARGS ?=
# build and verify agree on the tag by passing it (make's $(basename) would cut kt-0.7 to kt-0); a profile
# path may hold spaces (make splits it into words: the file name is the last one, the recipes quote it)
IMAGE_TAG ?= $(if $(filter %.yaml %.yml,$(lastword $(IMAGE_PROFILE))),$(basename $(notdir $(lastword $(IMAGE_PROFILE)))),$(IMAGE_PROFILE))

.PHONY: image image-deps image-verify image-test image-measure

image-deps: venv ## packer (Debian's 1.6.6 when none is installed); docker + base image for IMAGE_SOURCE=docker
	@command -v packer >/dev/null || { \
	  echo "image-deps: installing packer from Debian"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq packer >/dev/null; }
	@packer version
	$(if $(filter docker,$(IMAGE_SOURCE)),bash scripts/docker-ready.sh)

# build and verify share these: verify finds the manifest under IMAGE_OUT and boots IMAGE_REPO:IMAGE_TAG, so
# IMAGE_ARGS may not set them (it would build one image and verify another)
IMAGE_OUT ?= out/image
IMAGE_BUILD = $(KTINFRA) image build --source $(IMAGE_SOURCE) --profile '$(IMAGE_PROFILE)' \
  --repository $(IMAGE_REPO) --tag $(IMAGE_TAG) --playbook '$(IMAGE_PLAYBOOK)' --out '$(IMAGE_OUT)' $(IMAGE_ARGS)
IMAGE_SHARED_ARGS = $(filter --tag --tag=% --repository --repository=% --out --out=%,$(IMAGE_ARGS))
IMAGE_ENV_ARGS = $(filter --env --env=%,$(IMAGE_ARGS))

# what was typed is checked (--check: no docker, AWS or packer) before image-deps installs anything
image: venv ## bake the KT image (IMAGE_PROFILE=kt-0.7, IMAGE_SOURCE=docker) and verify it
	$(if $(IMAGE_SHARED_ARGS),$(error IMAGE_ARGS sets $(IMAGE_SHARED_ARGS): use IMAGE_TAG, IMAGE_REPO, IMAGE_OUT, which image-verify reads too))
	$(if $(and $(filter file,$(origin IMAGE_TAG)),$(IMAGE_ENV_ARGS)),$(error IMAGE_ARGS picks envs ($(IMAGE_ENV_ARGS)) \
	  but no IMAGE_TAG is given: the partial image would take the full image's tag $(IMAGE_TAG); give one, e.g. \
	  IMAGE_TAG=$(IMAGE_TAG)-inference))
	$(IMAGE_BUILD) --check
	$(MAKE) --no-print-directory image-deps
	$(IMAGE_BUILD)
	@if [ "$(IMAGE_SOURCE)" = docker ]; then $(MAKE) --no-print-directory image-verify; fi

image-verify: venv ## boot the built docker image with systemd and run the testinfra suites against it
	$(KTINFRA) image verify $(IMAGE_REPO):$(IMAGE_TAG) --out '$(IMAGE_OUT)'

image-test: image-deps ## CI stage: template + adapter against real packer, docker build of the smoke profile
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/image

image-measure: image-deps ## cold build, warm rebuild and a naive-Dockerfile build of IMAGE_PROFILE (slow)
	bash images/scripts/measure.sh '$(IMAGE_PROFILE)'

TEST_TARGETS += image-test
