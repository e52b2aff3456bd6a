#!/usr/bin/env bash
# Make this Debian 12 machine able to run the portal, idempotently and fast when nothing is missing:
#  1. the apt packages (gfal2 and plugins with the Python binding, XRootD, nginx+WebDAV, iperf3, iproute2 (ip, tc
#     and ss: the namespaced testbed), PostgreSQL,
#     Redis, Chromium for browser tests, openssl, RabbitMQ for the STOMP consumer's tests, pango for WeasyPrint's
#     PDF of the challenge report and poppler's pdftotext/pdftoppm to read it back);
#  2. .venv from Debian's Python 3.11 with --system-site-packages, the route by which Debian's python3-gfal2
#     is importable (PyPI's gfal2-python does not build against gfal2 2.21; see shared/notes);
#  3. the pinned Python dependencies, reinstalled only when requirements*.txt change.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

APT_PACKAGES=(
  python3 python3-venv python3-dev
  gfal2 gfal2-plugin-file gfal2-plugin-http gfal2-plugin-xrootd gfal2-plugin-mock python3-gfal2
  gfal2-util-scripts python3-gfal2-util
  xrootd-server xrootd-server-plugins xrootd-plugins xrootd-client xrootd-client-plugins xrootd-scitokens-plugins
  nginx libnginx-mod-http-dav-ext iperf3 iputils-tracepath iproute2 openssl
  postgresql redis-server chromium fonts-liberation
  rabbitmq-server
  libpango-1.0-0 libpangoft2-1.0-0 libharfbuzz-subset0 poppler-utils
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "[setup] installing apt packages: ${missing[*]}"
  # The portal runs its own private servers: keep apt from starting system PostgreSQL, Redis and nginx
  # (a policy-rc.d that refuses service starts, removed again afterwards unless the machine had one).
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod +x "$policy"
    trap '$sudo rm -f "$policy"' EXIT
  fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
  if [ -n "$(trap -p EXIT)" ]; then $sudo rm -f "$policy"; trap - EXIT; fi
fi

if ! .venv/bin/python -c "import gfal2" 2>/dev/null; then
  echo "[setup] creating .venv (Debian's Python 3.11 with its gfal2 binding)"
  rm -rf .venv
  /usr/bin/python3 -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q --upgrade pip
fi

stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing pinned Python dependencies"
  .venv/bin/python -m pip install -q -r requirements.txt -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
