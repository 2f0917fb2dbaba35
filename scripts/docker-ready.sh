#!/usr/bin/env bash
# Make this machine able to run the project's container tests:
#  - docker engine installed and running (nothing can be pulled, so no registry is touched),
#  - a Debian 12 base image with systemd as PID 1, python3 and this host's CA bundle,
#    built locally with mmdebstrap and imported as $KTINFRA_BASE_IMAGE.
# Idempotent: each step is skipped when already done.
set -euo pipefail

BASE_IMAGE=${KTINFRA_BASE_IMAGE:-ktinfra/debian12-systemd:latest}
SUITE=${KTINFRA_BASE_SUITE:-bookworm}
DOCKERD_LOG=${KTINFRA_DOCKERD_LOG:-/var/log/ktinfra-dockerd.log}

build_base_image() {
  echo "docker-ready: building $BASE_IMAGE from Debian $SUITE with mmdebstrap"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  mmdebstrap --quiet --variant=apt \
    --include=systemd,systemd-sysv,dbus,python3,python3-venv,python3-pip,python3-apt,sudo,ca-certificates,iproute2,procps,curl,less,numactl,git \
    --customize-hook='rm -f "$1"/etc/machine-id; touch "$1"/etc/machine-id' \
    --customize-hook='rm -f "$1"/lib/systemd/system/multi-user.target.wants/getty* "$1"/etc/systemd/system/getty.target.wants/*' \
    --customize-hook='cp /etc/ssl/certs/ca-certificates.crt "$1"/usr/local/share/ca-certificates/host-ca.crt' \
    --customize-hook='chroot "$1" update-ca-certificates >/dev/null 2>&1 || true' \
    --customize-hook='printf "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n" > "$1"/etc/pip.conf' \
    "$SUITE" "$tmp/rootfs.tar"
  docker import \
    --change 'CMD ["/lib/systemd/systemd"]' \
    --change 'ENV container=docker' \
    --change "LABEL ktinfra.recipe=$RECIPE_HASH" \
    "$tmp/rootfs.tar" "$BASE_IMAGE" >/dev/null
}

# `make test` runs its lanes at once (scripts/test-lanes.sh) and two of them start here: one at a time, or both
# would start dockerd and build the base image. The daemon started below must not inherit the lock (9>&-), or the
# other lane waits for as long as dockerd runs
LOCK_WAIT=${KTINFRA_DOCKER_READY_WAIT:-1800}
exec 9>"${TMPDIR:-/tmp}/ktinfra-docker-ready.lock"
flock -w "$LOCK_WAIT" 9 || {
  echo "docker-ready: another docker-ready still holds ${TMPDIR:-/tmp}/ktinfra-docker-ready.lock after ${LOCK_WAIT} s" >&2
  exit 1
}

need_root() { [ "$(id -u)" = 0 ] || { echo "docker-ready: must run as root (apt-get, dockerd)" >&2; exit 1; }; }

if ! command -v dockerd >/dev/null || ! command -v mmdebstrap >/dev/null; then
  need_root
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io mmdebstrap >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  need_root
  mkdir -p "$(dirname "$DOCKERD_LOG")"
  nohup dockerd >"$DOCKERD_LOG" 2>&1 9>&- &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { echo "docker-ready: dockerd did not start; see $DOCKERD_LOG" >&2; exit 1; }
fi

# The image is rebuilt whenever its recipe (the function above) changes
RECIPE_HASH=$(declare -f build_base_image | sha256sum | cut -c1-12)
if [ "$(docker image inspect -f '{{ index .Config.Labels "ktinfra.recipe" }}' "$BASE_IMAGE" 2>/dev/null)" != "$RECIPE_HASH" ]; then
  build_base_image
fi
echo "docker-ready: engine up, base image $BASE_IMAGE ready"
