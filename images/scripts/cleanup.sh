#!/bin/sh
# Last step of an image build (after validate): leave nothing host-specific, secret or cached in the image.
# KTINFRA_KEEP: comma list of what to keep: wheelhouse, models, tokens. KTINFRA_WHEELHOUSE: its path.
# KTINFRA_MODEL_DIRS: where model weights may have been put (space separated).
set -eu

KEEP=",${KTINFRA_KEEP:-},"
WHEELHOUSE=${KTINFRA_WHEELHOUSE:-/var/cache/ktinfra/wheelhouse}
# kt_model_store's data roots (/srv/ktinfra, AutoDL's /root/autodl-tmp) and its token file: a base image made
# from a provisioned host carries them (its weights, converted CPU weights, GGUF, LoRAs, HF_HOME)
STORE_ROOTS="/srv/ktinfra /root/autodl-tmp"
STORE_WEIGHTS="models cpu-weights gguf loras hf-cache"
STORE_TOKEN=/opt/ktinfra/etc/hf-token
store_dirs() { for r in $STORE_ROOTS; do for s in $STORE_WEIGHTS; do echo "$r/$s"; done; done; }
MODEL_DIRS=${KTINFRA_MODEL_DIRS:-/models /data/models /opt/kt/models $(store_dirs)}
keep() { case "$KEEP" in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
say() { echo "cleanup: $*"; }

# a misspelt item (model, token) would remove what the build was asked to keep: refuse it before any removal
set -f
IFS=,
for item in ${KTINFRA_KEEP:-}; do
  case "$item" in
    wheelhouse | models | tokens | "") ;;
    *)
      echo "cleanup: KTINFRA_KEEP names '$item'; it takes wheelhouse, models and tokens: nothing was removed" >&2
      exit 2
      ;;
  esac
done
unset IFS
set +f

used_before=$(df -P / | awk 'NR==2 {print $3}')

# package manager and python caches
if command -v apt-get >/dev/null; then apt-get clean; fi
rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
rm -rf /root/.cache/pip /home/*/.cache/pip /root/.cache/uv /home/*/.cache/uv /tmp/pip-* /tmp/ktinfra-*
rm -rf /root/.ansible /home/*/.ansible  # an AMI's play runs as ubuntu (become): its ~/.ansible stays
for conda in /opt/conda/bin/conda /root/miniconda3/bin/conda /root/anaconda3/bin/conda; do
  if [ -x "$conda" ]; then "$conda" clean --all --yes >/dev/null && say "conda caches cleaned ($conda)"; fi
done

# the wheelhouse: a docker build bind-mounts the host's (not part of the image); an AMI's is removed
if ! keep wheelhouse && [ -d "$WHEELHOUSE" ]; then
  if mountpoint -q "$WHEELHOUSE"; then
    say "wheelhouse $WHEELHOUSE is a mount (host cache), left alone"
  else
    rm -rf "$WHEELHOUSE" && say "wheelhouse removed"
  fi
fi

# model weights and hub tokens never ship unless asked
if ! keep models; then
  for d in $MODEL_DIRS /root/.cache/huggingface/hub /root/.cache/modelscope; do
    if [ -d "$d" ] && ! mountpoint -q "$d"; then rm -rf "$d" && say "removed $d"; fi
  done
fi
if ! keep tokens; then
  for home in /root /home/*; do
    [ -d "$home" ] || continue
    rm -f "$home/.cache/huggingface/token" "$home/.cache/huggingface/stored_tokens" "$home/.huggingface/token" \
      "$home"/.modelscope/credentials/* "$home/.netrc" "$home/.git-credentials"
  done
  rm -f "$STORE_TOKEN"
  for r in $STORE_ROOTS; do rm -f "$r/hf-cache/token" "$r/hf-cache/stored_tokens"; done  # HF_HOME's login
fi

# host identity: regenerated on first boot
: >/etc/machine-id
rm -f /var/lib/dbus/machine-id /var/lib/systemd/random-seed
rm -f /etc/ssh/ssh_host_*
# ...and made again at first boot: Debian's and Ubuntu's openssh-server make them only when installed
# (postinst) and sshd refuses to start without one; where cloud-init runs (an AMI) it makes them first
if [ -x /usr/sbin/sshd ]; then
  if command -v systemctl >/dev/null && [ -d /etc/systemd/system ]; then
    # BEGIN ktinfra-ssh-hostkeys.service
    cat >/etc/systemd/system/ktinfra-ssh-hostkeys.service <<'UNIT'
[Unit]
Description=SSH host keys of this machine (the ktinfra image ships none)
Documentation=man:ssh-keygen(1)
ConditionPathExistsGlob=!/etc/ssh/ssh_host_*_key
After=cloud-init.service cloud-init-network.service
Before=ssh.service sshd.service

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=ssh.service sshd.service
UNIT
    # END ktinfra-ssh-hostkeys.service
    systemctl enable ktinfra-ssh-hostkeys.service
    say "ssh host keys removed; ktinfra-ssh-hostkeys.service makes them at first boot"
  else
    say "WARNING: ssh host keys removed and no systemd here to make them at boot: run ssh-keygen -A before sshd"
  fi
fi
# the build's login key (packer's temporary key on an AMI): cloud-init installs the instance's own at boot
rm -f /root/.ssh/authorized_keys /home/*/.ssh/authorized_keys
# cloud-init state of the build instance: a new instance must run cloud-init again as its first boot
rm -rf /var/lib/cloud/instances /var/lib/cloud/instance /var/lib/cloud/data
# kt_host_tuning's report (kt_host_tuning_report_file's default) says what the build container or instance let
# the play set at runtime ("not_set: Read-only file system"); the image's hosts apply the persistent files at
# boot and write their own report when the role runs there
rm -f /var/lib/ktinfra/tuning.json
# kt_host_tuning's undo record holds the build machine's values before tuning (its sysctls, /dev/shm size,
# fstab): kt_host_tuning_state=absent on a booted host would write those back. The image is the baseline.
rm -f /var/lib/ktinfra/host-tuning.json
# kt_common's download settings folders (DIR/.ktinfra-run.UID: a proxy password while a download runs)
find /opt /root /home /srv -xdev -type d -name '.ktinfra-run.*' -prune -exec rm -rf {} + 2>/dev/null || true

# shell history and logs of the build
rm -f /root/.bash_history /root/.python_history /home/*/.bash_history /home/*/.python_history \
  /root/.lesshst /root/.viminfo
find /var/log -type f \( -name '*.gz' -o -name '*.[0-9]' \) -delete 2>/dev/null || true
find /var/log -type f ! -path '/var/log/journal/*' -exec truncate -s 0 {} + 2>/dev/null || true  # syslog, wtmp, ...
find /var/log/journal -type f -name '*.journal*' -delete 2>/dev/null || true
rm -rf /var/tmp/* 2>/dev/null || true

used_after=$(df -P / | awk 'NR==2 {print $3}')
say "done (filesystem use ${used_before}K -> ${used_after}K)"
