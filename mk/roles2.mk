# roles2: model store, serve, train, router roles; `ktinfra provision`. `make roles2-test` (docker): lint of
# the role helpers and molecule tests, then the serve scenario (playbooks/site.yml end to end: provision, store,
# serve, train with the LoRA hand-off, router) in a systemd container and the serve-supervisor scenario in one
# without systemd. Molecule and its docker plugin come from roles1's dev deps (or `pip install molecule
# molecule-plugins[docker]`). The tiny model and the finished KT training output come from the operate stage's
# generator (scripts/tiny_model.py in its venv, mk/operate.mk).
TEST_TARGETS += roles2-test

.PHONY: roles2-lint roles2-test roles2-serve-test roles2-supervisor-test

roles2-lint: venv ## ruff over the roles' helper scripts and molecule tests of roles2
	$(VENV)/bin/ruff check roles/kt_model_store/files molecule/_shared molecule/serve molecule/serve-supervisor
	$(VENV)/bin/ruff format --check roles/kt_model_store/files molecule/_shared molecule/serve molecule/serve-supervisor

roles2-test: roles2-serve-test roles2-supervisor-test ## molecule: site.yml under systemd (provision..router, LoRA hand-off); supervisor fallback

roles2-serve-test: venv roles2-lint docker-ready $(TINY_DONE) ## molecule serve: site.yml end to end in a systemd container
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH KTINFRA_GENERATOR_PYTHON=$(abspath $(SERVE_PY)) \
	  $(VENV)/bin/molecule test -s serve

roles2-supervisor-test: venv roles2-lint docker-ready $(TINY_DONE) ## molecule serve-supervisor: the serve role in a container without systemd
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/molecule test -s serve-supervisor
