# KT host suite (tests/infra) run for real where CI runs: this machine (no GPU; AMX or not) over local://,
# and a systemd container over docker:// holding a real unit and a real HTTP health endpoint. The GPU and
# kt-kernel path is proven on the device host instead (docs/results/2026-11-21-h100-amx/, scripts/device/).
# The AMX checks pass where this CPU has AMX (a Sapphire Rapids CI VM) and fail or skip where it has none.
INFRA_OUT := out/infra
INFRA_IMAGE ?= ktinfra/debian12-systemd:latest
INFRA_CT := device-infra-$(shell echo $$PPID)
HAS_AMX := $(shell grep -qw amx_tile /proc/cpuinfo && echo 1 || echo 0)
INFRA_JSON = HAS_AMX=$(HAS_AMX) $(VPY) -c 'import json,os,sys; amx = os.environ["HAS_AMX"] == "1"; d=json.load(open(sys.argv[1])); c={x["id"]: x["status"] for x in d["checks"]}; $(1)' $(2)

TEST_TARGETS += infra-local infra-docker infra-ssh
.PHONY: infra-local infra-docker infra-ssh

infra-local: venv ## KT host suite on this GPU-less machine: role rules, a real health endpoint
	@mkdir -p $(INFRA_OUT)/www && echo ok > $(INFRA_OUT)/www/health
	rc=0; $(KTINFRA) doctor --role sft --json > $(INFRA_OUT)/sft.json || rc=$$?; test $$rc -eq 1
	$(call INFRA_JSON,assert c["cpu.amx_cpu_flags"] == ("passed" if amx else "failed") \
	  and c["gpu.gpu_visible"] == "failed" and not d["ok"]; \
	  print("ok   role sft on a host without a GPU fails" + (" (AMX checks pass)" if amx else " (no AMX)")), \
	  $(INFRA_OUT)/sft.json)
	$(KTINFRA) doctor --role any --json > $(INFRA_OUT)/any.json
	$(call INFRA_JSON,assert c["cpu.amx_cpu_flags"] == ("passed" if amx else "skipped") \
	  and c["gpu.gpu_visible"] == "skipped" and c["cpu.numa_memory_policy_permitted"] == "passed" and d["ok"]; \
	  print("ok   role any: no GPU checks, set_mempolicy permitted; AMX " + ("checks pass" if amx else "skipped")), \
	  $(INFRA_OUT)/any.json)
	rc=0; $(KTINFRA) doctor --role any -k amx --json > $(INFRA_OUT)/any-amx.json || rc=$$?; test $$rc -eq $$((1 - $(HAS_AMX)))
	$(call INFRA_JSON,assert (d["summary"]["passed"] > 0) == amx == d["ok"]; \
	  print("ok   role any -k amx: " + ("checks pass -> exit 0" if amx else "all skipped: nothing passed -> exit 1")), \
	  $(INFRA_OUT)/any-amx.json)
	@free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }; \
	up=$$(free_port); down=$$(free_port); \
	python3 -m http.server $$up --bind 127.0.0.1 --directory $(INFRA_OUT)/www >/dev/null 2>&1 & pid=$$!; \
	trap "kill $$pid" EXIT; for i in $$(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$$up) 2>/dev/null && break; sleep 0.1; done; \
	$(KTINFRA) doctor --role any -k health --health-url http://127.0.0.1:$$up/health --json > $(INFRA_OUT)/up.json \
	  || { echo "FAIL health endpoint answering, doctor exit $$?"; exit 1; }; echo "ok   health endpoint answering -> exit 0"; \
	rc=0; $(KTINFRA) doctor --role any -k health --health-url http://127.0.0.1:$$down/health --json \
	  > $(INFRA_OUT)/down.json || rc=$$?; test $$rc -eq 1 || { echo "FAIL dead health endpoint, doctor exit $$rc"; exit 1; }; \
	echo "ok   dead health endpoint -> exit 1"; \
	printf 'ktbox ansible_connection=local ansible_python_interpreter=/usr/bin/python3\n' > $(INFRA_OUT)/hosts.ini; \
	$(KTINFRA) doctor --hosts "ansible://ktbox?ansible_inventory=$(INFRA_OUT)/hosts.ini" --role any \
	  --health-url http://127.0.0.1:$$up/health --json > $(INFRA_OUT)/ansible.json \
	  || { echo "FAIL ansible:// backend"; exit 1; }; echo "ok   ansible:// backend: probes ran, health 200"

infra-docker: venv docker-ready ## KT host suite over docker:// against a systemd container with a real serve unit
	docker rm -f $(INFRA_CT) >/dev/null 2>&1 || true
	docker run -d --name $(INFRA_CT) --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
	  --cgroupns=host $(INFRA_IMAGE) >/dev/null
	@set -e; trap 'docker rm -f $(INFRA_CT) >/dev/null' EXIT; \
	for i in $$(seq 60); do docker exec $(INFRA_CT) systemctl is-system-running 2>/dev/null \
	  | grep -qE 'running|degraded' && break; sleep 1; done; \
	docker exec -i $(INFRA_CT) sh -s < tests/infra/ci/standin-serve.sh; \
	$(KTINFRA) doctor --hosts docker://$(INFRA_CT) --role any --json > $(INFRA_OUT)/docker-up.json; \
	$(call INFRA_JSON,assert c["services.units_enabled_and_active"] == c["services.health_endpoint_answers"] \
	  == "passed" and c["cpu.amx_cpu_flags"] == ("passed" if amx else "skipped") and d["ok"]; \
	  print("ok   docker:// unit active, health 200"), \
	  $(INFRA_OUT)/docker-up.json); \
	docker exec $(INFRA_CT) systemctl stop ktinfra-serve@selftest.service; \
	rc=0; $(KTINFRA) doctor --hosts docker://$(INFRA_CT) --role any -k services --json \
	  > $(INFRA_OUT)/docker-down.json || rc=$$?; test $$rc -eq 1 || { echo "FAIL docker:// stopped unit, doctor exit $$rc"; exit 1; }; \
	$(call INFRA_JSON,assert c["services.units_enabled_and_active"] == "failed" \
	  and c["services.health_endpoint_answers"] == "failed"; print("ok   docker:// stopped unit -> exit 1"), \
	  $(INFRA_OUT)/docker-down.json)
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/test_doctor_supervised.py \
	  tests/integration/test_doctor_supervisor_dir.py tests/integration/test_doctor_unit_states.py \
	  tests/integration/test_doctor_stopped_unit_instance.py tests/integration/test_doctor_static_unit.py \
	  tests/integration/test_infra_no_numa_sysfs.py tests/integration/test_doctor_hidden_pid1.py \
	  tests/integration/test_doctor_removed_unit.py tests/integration/test_doctor_serve_dir_unreadable.py \
	  tests/integration/test_doctor_unloaded_unit_health.py tests/integration/test_infra_mempolicy.py

infra-ssh: venv docker-ready ## KT host suite over ssh:// against a systemd container running sshd (loopback port)
	KTINFRA=$(KTINFRA) INFRA_IMAGE=$(INFRA_IMAGE) INFRA_OUT=$(INFRA_OUT) bash tests/infra/ci/ssh-backend.sh
	$(VENV)/bin/pytest -q -p no:cacheprovider tests/integration/test_provision_ssh_host_key.py
