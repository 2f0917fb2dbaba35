# Planner: `ktinfra plan` on the facts fixtures must give the expected exit status (0 feasible, 2 not).
.PHONY: planner-cli
TEST_TARGETS += planner-cli

PLANNER_CASES := \
  seed002-autodl-6430-4090:Qwen3-30B-A3B:0 seed002-autodl-6430-4090:DeepSeek-V3:2 \
  h100-amx:Qwen3-30B-A3B:0 h100-amx:DeepSeek-V3:2 \
  xeon8352v-4090-noamx:Qwen3-30B-A3B:0 dual-spr-2xnuma-4xl40s:DeepSeek-V3:0

planner-cli: venv ## ktinfra plan on the facts fixtures: expected exit codes, JSON agrees
	@set -e; for case in $(PLANNER_CASES); do \
	  IFS=: read -r host model want <<< "$$case"; \
	  rc=0; $(KTINFRA) plan --model $$model --facts tests/fixtures/facts/$$host.json --json > out-plan.json || rc=$$?; \
	  test $$rc -eq $$want || { echo "FAIL plan $$model on $$host: exit $$rc, want $$want"; exit 1; }; \
	  $(VPY) -c 'import json,sys; sys.exit(json.load(open("out-plan.json"))["feasible"] != ('$$want' == 0))'; \
	  echo "ok   plan $$model on $$host: exit $$rc"; \
	done; rm -f out-plan.json
	@$(KTINFRA) models > /dev/null && echo "ok   ktinfra models"
