#!/usr/bin/env bash
# The KT host suite over testinfra's ssh:// backend: a systemd container running a real OpenSSH server
# (Debian's openssh-server, installed from the apt archive) and the stand-in serve unit, its port 22
# published on loopback only. `ktinfra doctor --hosts ssh://...` must pass with the unit up and fail with it
# stopped, as over docker://.
set -euo pipefail
KTINFRA=${KTINFRA:-.venv/bin/ktinfra}
IMAGE=${INFRA_IMAGE:-ktinfra/debian12-systemd:latest}
OUT=${INFRA_OUT:-out/infra}/ssh
CT=device-infra-ssh-$$
mkdir -p "$OUT"
rm -f "$OUT"/id "$OUT"/id.pub
ssh-keygen -q -t ed25519 -N '' -f "$OUT/id"
trap 'docker rm -f "$CT" >/dev/null 2>&1 || true' EXIT
docker run -d --name "$CT" --tmpfs /run --tmpfs /run/lock -v /sys/fs/cgroup:/sys/fs/cgroup:rw --cgroupns=host \
  -p 127.0.0.1::22 "$IMAGE" >/dev/null
for _ in $(seq 60); do
  docker exec "$CT" systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded' && break; sleep 1
done
docker exec "$CT" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openssh-server >/dev/null'
docker exec -i "$CT" sh -c 'mkdir -p /root/.ssh && chmod 700 /root/.ssh && cat > /root/.ssh/authorized_keys' < "$OUT/id.pub"
docker exec "$CT" systemctl restart ssh
docker exec -i "$CT" sh -s < tests/infra/ci/standin-serve.sh
port=$(docker port "$CT" 22/tcp | head -1 | sed 's/.*://')
cat > "$OUT/ssh_config" <<CFG
Host ktbox
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile $PWD/$OUT/id
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
CFG
for _ in $(seq 30); do ssh -F "$OUT/ssh_config" ktbox true 2>/dev/null && break; sleep 1; done
ssh -F "$OUT/ssh_config" ktbox true || { echo "FAIL ssh login to the test container"; exit 1; }
url="ssh://ktbox?ssh_config=$PWD/$OUT/ssh_config"
"$KTINFRA" doctor --hosts "$url" --role any --json > "$OUT/up.json" || { echo "FAIL ssh:// unit up"; exit 1; }
python3 - "$OUT/up.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); c = {x["id"]: x["status"] for x in d["checks"]}
assert d["ok"] and c["services.units_enabled_and_active"] == c["services.health_endpoint_answers"] == "passed", c
assert all(x["host"].startswith("ssh://") or "ktbox" in x["host"] for x in d["checks"]), d["checks"][0]["host"]
print("ok   ssh:// unit active, health 200")
PY
docker exec "$CT" systemctl stop ktinfra-serve@selftest.service
rc=0; "$KTINFRA" doctor --hosts "$url" --role any -k services --json > "$OUT/down.json" || rc=$?
test "$rc" -eq 1 || { echo "FAIL ssh:// stopped unit: doctor exit $rc, want 1"; exit 1; }
echo "ok   ssh:// stopped unit -> exit 1"
