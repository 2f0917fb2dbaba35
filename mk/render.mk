# `ktinfra render` stage: rendered units (and `ktinfra lora serve --start`) under a real systemd in a Debian 12
# container (docker needed).
.PHONY: render-systemd
TEST_TARGETS += render-systemd

render-systemd: venv docker-ready ## rendered units under systemd in a container; `lora serve --start` there; OS package installs against real apt
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/test_render_systemd.py \
		tests/integration/test_lora_start_systemd.py tests/integration/test_os_packages.py \
		tests/integration/test_train_end_marker.py

# LLaMA-Factory 0.9.4 (PyPI) reads the legacy recipes. Installed --no-deps plus the dependencies its argument
# parser imports, at the upper bounds 0.9.4 declares: the web UI and multimodal ones (gradio, torchvision,
# torchaudio, av, modelscope) are left out, and torch is the CPU build on this machine's disk, so the venv is
# ~1.7 GB instead of the CUDA stack.
RENDER_DIR := .cache/render
LF094_VENV := $(RENDER_DIR)/venv-lf094
LF094_PKGS := torch==2.13.0 transformers==4.57.1 datasets==4.0.0 accelerate==1.11.0 peft==0.17.1 trl==0.24.0 \
	matplotlib pyyaml omegaconf 'tyro<0.9.0' fire einops sentencepiece tiktoken scipy pandas protobuf safetensors
.PHONY: render-legacy-recipe
TEST_TARGETS += render-legacy-recipe

$(LF094_VENV)/.installed: mk/render.mk
	rm -rf $(LF094_VENV)
	$(PYTHON) -m venv $(LF094_VENV)
	$(LF094_VENV)/bin/python -m pip install -q $(LF094_PKGS)
	$(LF094_VENV)/bin/python -m pip install -q --no-deps llamafactory==0.9.4
	touch $@

render-legacy-recipe: venv $(LF094_VENV)/.installed ## legacy-stack recipes read by LLaMA-Factory 0.9.4's get_train_args
	KTINFRA_LF094_PYTHON=$(abspath $(LF094_VENV))/bin/python \
		$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/legacy_recipe
