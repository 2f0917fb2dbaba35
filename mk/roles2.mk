# roles2: model store, serve, train, router roles; `ktinfra provision`. `make roles2-test` (docker): lint of
# the role helpers and molecule tests, then the serve scenario in a systemd container and the
# serve-supervisor scenario in one without systemd. Molecule and its docker plugin come from roles1's dev
# deps (or `pip install molecule molecule-plugins[docker]`). KTINFRA_SRC (default: this checkout) is the tree installed on the target.
TEST_TARGETS += roles2-test

ROLES2_TINY_MODEL := /var/cache/ktinfra/tiny-qwen3-moe
ROLES2_TORCH_VENV := /var/cache/ktinfra/torch-venv

.PHONY: roles2-lint roles2-tiny-model roles2-test

roles2-lint: venv ## ruff over the roles' helper scripts and molecule tests of roles2
	$(VENV)/bin/ruff check roles/kt_model_store/files molecule/serve molecule/serve-supervisor
	$(VENV)/bin/ruff format --check roles/kt_model_store/files molecule/serve molecule/serve-supervisor

$(ROLES2_TINY_MODEL)/config.json:
	test -x $(ROLES2_TORCH_VENV)/bin/python || { $(PYTHON) -m venv $(ROLES2_TORCH_VENV) && \
	  $(ROLES2_TORCH_VENV)/bin/pip install -q torch==2.13.0 transformers safetensors; }
	$(ROLES2_TORCH_VENV)/bin/python molecule/serve/files/build_tiny_moe.py $(ROLES2_TINY_MODEL)

roles2-tiny-model: $(ROLES2_TINY_MODEL)/config.json ## tiny random-weight Qwen3-MoE for the molecule scenarios

roles2-test: venv roles2-lint roles2-tiny-model ## molecule: store/serve/train/router under systemd; supervisor fallback
	bash scripts/docker-ready.sh
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH KTINFRA_SRC=$${KTINFRA_SRC:-$(CURDIR)} $(VENV)/bin/molecule test -s serve
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH KTINFRA_SRC=$${KTINFRA_SRC:-$(CURDIR)} $(VENV)/bin/molecule test -s serve-supervisor
