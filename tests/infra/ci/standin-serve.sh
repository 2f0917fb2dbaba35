#!/bin/sh
# Inside a systemd container (CI): a ktinfra-serve@ template unit laid out as `ktinfra render serve` lays it
# out (EnvironmentFile /etc/ktinfra/serve/NAME.env carrying KT_HEALTH_URL), whose server is a real HTTP
# server answering /health instead of sglang (no GPU, no model in CI). Enables and starts instance "selftest".
set -eu
mkdir -p /srv/kt /etc/ktinfra/serve
echo ok > /srv/kt/health
cat > /etc/systemd/system/ktinfra-serve@.service <<'UNIT'
[Unit]
Description=stand-in KT serve endpoint %i
[Service]
Type=exec
EnvironmentFile=/etc/ktinfra/serve/%i.env
ExecStart=/usr/bin/python3 -m http.server ${KT_PORT} --bind 127.0.0.1 --directory /srv/kt
[Install]
WantedBy=multi-user.target
UNIT
printf 'KT_PORT=30123\nKT_HEALTH_URL=http://127.0.0.1:30123/health\n' > /etc/ktinfra/serve/selftest.env
chmod 600 /etc/ktinfra/serve/selftest.env
systemctl daemon-reload
systemctl enable --now ktinfra-serve@selftest.service
for i in $(seq 50); do
  python3 -c 'import urllib.request as u; u.urlopen("http://127.0.0.1:30123/health")' 2>/dev/null && exit 0
  sleep 0.2
done
echo "stand-in server did not answer" >&2; exit 1
