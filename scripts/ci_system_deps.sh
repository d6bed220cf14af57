#!/usr/bin/env bash
# System packages the tests need (called by .ci/run before `make test`):
#   redis-server  the gateway's tests start their own redis-server on a free port
#   postgresql    the system of record's tests start their own PostgreSQL on a free port
#   chromium      the web page is driven in headless Chromium (playwright with
#                 executable_path=/usr/bin/chromium; no browser download)
# Idempotent: installs only what is missing.
set -euo pipefail

packages=()
command -v redis-server >/dev/null 2>&1 || packages+=(redis-server)
[ -x /usr/bin/chromium ] || packages+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || packages+=(postgresql)
if [ ${#packages[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
echo "== installing system packages: ${packages[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${packages[@]}"
