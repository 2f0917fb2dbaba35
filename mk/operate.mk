# Operate stage: real tiny-model servers on loopback (transformers serve on the CPU, sglang-router in front of
# two of them) exercising `ktinfra bench`, the capacity search, `ktinfra lora` (with kt-kernel's real adapter
# converter) and the router path, plus `ktinfra tune --unit` on the journal of a systemd container (docker,
# base image from `make docker-ready`). The servers live in their own venv so the project venv stays light.

OPERATE_DIR := .cache/operate
SERVE_VENV := $(OPERATE_DIR)/venv-serve
SERVE_PY := $(SERVE_VENV)/bin/python
TINY_MODEL := $(OPERATE_DIR)/tiny-qwen3-moe
TINY_LORA := $(OPERATE_DIR)/tiny-lora
TINY_KT_LORA := $(OPERATE_DIR)/tiny-kt-lora
# torch pinned to 2.13.0: pip takes the CPU wheel on this machine's disk; unpinned, peft would pull a CUDA build.
SERVE_PKGS := torch==2.13.0 'transformers[serving]==5.23.0' peft==0.21.2 sglang-router==0.3.2
# kt-kernel only for its LoRA converter (kt_kernel/sft/convert_kt_to_sglang_adapter.py needs torch + safetensors):
# --no-deps keeps torch 2.13 CPU (the wheel pins 2.9.1); its native extension is never imported. The wheelhouse
# copy (roles I stage cache) is taken when present, else PyPI.
KT_WHEELHOUSE ?= /var/cache/ktinfra/wheelhouse
# a wheel that is not a whole zip (roles1's envs scenario may be writing it: `make test` runs both at once) is
# left for PyPI's
KT_KERNEL_WHEEL = $(firstword $(wildcard $(KT_WHEELHOUSE)/kt_kernel-0.7.2-cp311-*.whl))
KT_KERNEL = $(if $(KT_KERNEL_WHEEL),$$($(PYTHON) -m zipfile -t $(KT_KERNEL_WHEEL) >/dev/null 2>&1 \
  && echo $(KT_KERNEL_WHEEL) || echo kt-kernel==0.7.2),kt-kernel==0.7.2)

.PHONY: serve-venv tiny-model test-operate

# The serve venv and the tiny model are built under a lock: `make test`'s lanes may ask for them at once (the
# operate stage and the serve scenario in one lane, the serve-supervisor scenario in another). The outer rule
# takes the lock and runs make again on the same target, which finds it up to date when another lane has
# just built it; each is marked done by a stamp written last, so a half-built one is never taken as done.
TINY_DONE := $(OPERATE_DIR)/.tiny-model.done
locked_make = mkdir -p $(OPERATE_DIR) && flock $(OPERATE_DIR)/.build.lock $(MAKE) --no-print-directory OPERATE_LOCKED=1 $@

$(SERVE_VENV)/.installed: mk/operate.mk
$(TINY_DONE): scripts/tiny_model.py $(SERVE_VENV)/.installed

ifeq ($(OPERATE_LOCKED),1)
$(SERVE_VENV)/.installed:
	rm -rf $(SERVE_VENV)
	$(PYTHON) -m venv $(SERVE_VENV)
	$(SERVE_PY) -m pip install -q $(SERVE_PKGS)
	$(SERVE_PY) -m pip install -q --no-deps $(KT_KERNEL)
	touch $@

$(TINY_DONE):
	rm -rf $@ $(TINY_MODEL) $(TINY_LORA) $(TINY_KT_LORA)
	HF_HUB_OFFLINE=1 $(SERVE_PY) scripts/tiny_model.py $(TINY_MODEL) --lora-out $(TINY_LORA) \
		--kt-lora-out $(TINY_KT_LORA)
	touch $@
else
$(SERVE_VENV)/.installed $(TINY_DONE):
	$(locked_make)
endif

serve-venv: $(SERVE_VENV)/.installed ## venv for the tiny test servers (torch CPU, transformers serve, sglang-router, kt-kernel)

tiny-model: $(TINY_DONE) ## random-weight Qwen3-MoE + tokenizer + PEFT adapter + KT-format LoRA output

test-operate: venv docker-ready $(TINY_DONE) ## real tiny servers + router (bench, capacity, LoRA), tune --unit on a real journal
	KTINFRA_SERVE_PYTHON=$(abspath $(SERVE_PY)) KTINFRA_TINY_MODEL=$(abspath $(TINY_MODEL)) \
	KTINFRA_TINY_LORA=$(abspath $(TINY_LORA)) KTINFRA_TINY_KT_LORA=$(abspath $(TINY_KT_LORA)) timeout 540 $(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/operate

TEST_TARGETS += test-operate
