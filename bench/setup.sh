#!/usr/bin/env bash
# Installs the benchmark's peer, Redis, from Debian's packages (issue 5).
# Idempotent: does nothing when redis-server is already on PATH. The
# harness starts its own redis-server on a loopback port in a temp dir; the
# distribution's service is stopped so it does not compete for the cores.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends redis-server
# The package starts a system instance; the benchmark runs its own.
if command -v systemctl >/dev/null 2>&1; then
  $SUDO systemctl disable --now redis-server >/dev/null 2>&1 || true
fi
$SUDO service redis-server stop >/dev/null 2>&1 || true
command -v redis-server >/dev/null
