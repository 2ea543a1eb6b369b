#!/usr/bin/env bash
# The test command of the README ("On a fresh machine"), and exactly what
# .ci/run runs: it installs what the suite needs and this machine lacks,
# then runs every test of the workspace. Extra arguments go to
# `cargo nextest run` (e.g. `./test.sh -E 'test(demo)'`).
#
# What the suite needs besides the Rust toolchain:
# - cargo-nextest (the runner; .config/nextest.toml groups the torture tests);
# - Debian's chromium (carrier/tests/operations.rs renders the operator
#   page headless).
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

# Debian packages the suite needs, as "command package" pairs.
missing=()
for pair in "chromium chromium"; do
  read -r cmd pkg <<<"$pair"
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "test.sh: installing ${missing[*]} (Debian packages)" >&2
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install ${missing[*]} by hand"
  "${as_root[@]}" apt-get update -qq || fail "apt-get update failed: install ${missing[*]} by hand"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" \
    || fail "cannot install ${missing[*]}"
fi

exec cargo nextest run --workspace --no-fail-fast "$@"
