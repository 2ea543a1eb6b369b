#!/usr/bin/env bash
# The test command of the README ("On a fresh machine"), and exactly what
# .ci/run runs: it installs what the suite needs and this machine lacks,
# then runs every test of the workspace. Extra arguments go to
# `cargo nextest run` (e.g. `./test.sh -E 'test(demo)'`).
#
# What the suite needs besides the Rust toolchain:
# - cargo-nextest (the runner; .config/nextest.toml groups the torture tests);
# - Debian's chromium (carrier/tests/operations.rs renders the operator
#   page headless);
# - Debian's postgresql (the PostgreSQL store's tests start their own
#   throwaway clusters with its initdb and pg_ctl, pgtest/; the package's
#   own system cluster is left stopped and never used);
# - Debian's prometheus, for its promtool (tests/e2e/dashboards.rs runs
#   `promtool check rules` on deploy/prometheus/alerts.yml);
# - Debian's groff-base (tests/e2e/json_output.rs renders the manual page);
# - Debian's libfaketime (tests/e2e/nodes_clock.rs runs a node days ahead of
#   or behind the database's clock).
# - Debian's patroni and etcd-server (pgtest/src/patroni.rs starts a
#   Patroni-managed primary and synchronous standby over a throwaway etcd
#   for the failover tortures, tests/torture/failover.rs; the packages'
#   own etcd service is stopped and never used).
# - Debian's nftables (tests/e2e/tcp.rs drops UDP to a carrier's port with
#   a table of its own, removed afterwards; the tests run as root).
# A prerequisite that cannot be installed stops here with a message that
# names it; no test is ever skipped for want of one.
set -euo pipefail
cd "$(dirname "$0")"

fail() { echo "test.sh: $*" >&2; exit 1; }

command -v cargo >/dev/null 2>&1 || fail "cargo is required (install Rust with rustup)"

if ! cargo nextest --version >/dev/null 2>&1; then
  echo "test.sh: installing cargo-nextest" >&2
  cargo install cargo-nextest --locked || fail "cannot install cargo-nextest"
fi

# Debian packages the suite needs, as "program package" pairs (a program
# is a command on PATH or an absolute glob).
missing=()
for pair in "chromium chromium" "/usr/lib/postgresql/*/bin/initdb postgresql" "promtool prometheus" \
  "groff groff-base" "/usr/lib/*/faketime/libfaketime.so.1 libfaketime" "patroni patroni" "etcd etcd-server" \
  "nft nftables"; do
  read -r cmd pkg <<<"$pair"
  case "$cmd" in
    /*) compgen -G "$cmd" >/dev/null || missing+=("$pkg") ;;
    *) command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg") ;;
  esac
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]} (Debian packages)" >&2
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install ${missing[*]} by hand"
  "${as_root[@]}" apt-get update -qq || fail "apt-get update failed: install ${missing[*]} by hand"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
    || fail "cannot install ${missing[*]}"
  # The postgresql package starts a system cluster; the tests never use it.
  if [[ " ${missing[*]} " == *" postgresql "* ]] && command -v pg_lsclusters >/dev/null 2>&1; then
    pg_lsclusters -h 2>/dev/null | while read -r version name _; do
      "${as_root[@]}" pg_ctlcluster "$version" "$name" stop 2>/dev/null || true
    done
  fi
  # So does etcd-server (on 2379); the tests start their own on free ports.
  if [[ " ${missing[*]} " == *" etcd-server "* ]] && command -v invoke-rc.d >/dev/null 2>&1; then
    "${as_root[@]}" invoke-rc.d etcd stop 2>/dev/null || true
  fi
fi

exec cargo nextest run --workspace --no-fail-fast "$@"
