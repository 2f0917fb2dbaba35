# `ktinfra facts` inside real docker containers: a CFS quota + cpuset + memory limit (cgroup v1 on this
# host), and a systemd-as-PID-1 container. The capture is written in the container by the package itself
# (ktinfra.facts needs only the standard library) and parsed on the host by the CLI.
FACTS_IMAGE ?= ktinfra/debian12-systemd:latest
FACTS_OUT := out/facts-docker
FACTS_RUN := docker run --rm -v $(CURDIR):/src:ro -v $(CURDIR)/$(FACTS_OUT):/out -e PYTHONPATH=/src
FACTS_CHECK = $(VPY) -c 'import json,sys; d=json.load(open(sys.argv[1])); c=d["cpu"]; m=d["memory"]; $(1)' $(2)

TEST_TARGETS += facts-docker
.PHONY: facts-docker

facts-docker: venv docker-ready ## facts in real containers: CPU quota, cpuset, memory limit, systemd PID 1
	rm -rf $(FACTS_OUT) && mkdir -p $(FACTS_OUT)
	$(FACTS_RUN) --name facts-quota-$$$$ --cpus 1.5 --cpuset-cpus 0 --memory 512m $(FACTS_IMAGE) \
	  python3 -c 'import json, ktinfra.facts as f; f.write_capture("/out/quota"); \
	    json.dump(f.gather_live(), open("/out/quota-live.json", "w"))'
	$(KTINFRA) facts --from $(FACTS_OUT)/quota --json > $(FACTS_OUT)/quota.json
	$(VPY) tests/integration/facts_round_trip.py $(FACTS_OUT)/quota-live.json $(FACTS_OUT)/quota.json
	$(call FACTS_CHECK,assert c["quota_cpus"] == 1.5 and c["usable_cpus"] == "0" and c["logical_cpus"] == 1 \
	  and c["physical_cores"] == 1 and m["cgroup_limit_bytes"] == m["total_bytes"] == 512 * 2**20 \
	  and d["container"] and d["init"] == "python3" and d["os"]["glibc_source"] == "ldd"; print("quota ok"),\
	  $(FACTS_OUT)/quota.json)
	docker rm -f facts-systemd >/dev/null 2>&1 || true
	docker run -d --name facts-systemd --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
	  --cgroupns=host --memory 768m -v $(CURDIR):/src:ro -v $(CURDIR)/$(FACTS_OUT):/out $(FACTS_IMAGE) >/dev/null
	for i in $$(seq 60); do docker exec facts-systemd systemctl is-system-running 2>/dev/null \
	  | grep -qE 'running|degraded' && break; sleep 1; done; \
	docker exec -e PYTHONPATH=/src facts-systemd python3 -c 'import json, ktinfra.facts as f; \
	  f.write_capture("/out/systemd"); json.dump(f.gather_live(), open("/out/systemd-live.json", "w"))'; \
	rc=$$?; docker rm -f facts-systemd >/dev/null; exit $$rc
	$(KTINFRA) facts --from $(FACTS_OUT)/systemd --json > $(FACTS_OUT)/systemd.json
	$(VPY) tests/integration/facts_round_trip.py $(FACTS_OUT)/systemd-live.json $(FACTS_OUT)/systemd.json
	$(call FACTS_CHECK,assert d["init"] == "systemd" and d["container"] and m["total_bytes"] == 768 * 2**20 \
	  and c["quota_cpus"] is None and "proc-self-cgroup.txt names a docker cgroup" in d["container_evidence"]; \
	  print("systemd ok"),$(FACTS_OUT)/systemd.json)
