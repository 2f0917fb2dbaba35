# `ktinfra render` stage: rendered units under a real systemd in a Debian 12 container (docker needed).
.PHONY: render-systemd
TEST_TARGETS += render-systemd

render-systemd: venv docker-ready ## rendered serve/convert/train units run under systemd in a container
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/test_render_systemd.py
