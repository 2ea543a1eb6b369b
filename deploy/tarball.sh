#!/usr/bin/env bash
# Builds rltp-carrier as a tarball with the layout of the Containerfile and
# the systemd unit, rooted at /:
#
#   usr/local/bin/rltp-carrier                         the binary (ExecStart)
#   etc/rltp-carrier/carrier.toml                      the shipped config
#   lib/systemd/system/rltp-carrier.service            the unit
#   etc/sysctl.d/99-rltp-carrier-quic.conf             UDP buffer sysctls
#   usr/share/bash-completion/completions/rltp-carrier bash completions
#   usr/share/zsh/vendor-completions/_rltp-carrier     zsh completions
#   usr/share/fish/vendor_completions.d/rltp-carrier.fish
#   usr/share/man/man1/rltp-carrier*.1.gz              the manual pages
#   usr/share/doc/rltp-carrier/                        README, OPERATIONS, ERRORS,
#                                                      dashboard, alert rules
#
# Install with `tar -xzf rltp-carrier-VERSION-linux.tar.gz -C /`, then
# `systemctl daemon-reload && systemctl enable --now rltp-carrier`.
#
# Usage: deploy/tarball.sh [--debug] [--binary PATH] OUT.tar.gz
#   --binary PATH  package this already-built binary (else cargo builds it,
#                  release unless --debug).
set -euo pipefail
cd "$(dirname "$0")/.."

fail() { echo "tarball.sh: $*" >&2; exit 1; }
profile=release binary="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --debug) profile=debug ;;
    --binary) binary="${2:?--binary needs a path}"; shift ;;
    -*) fail "unknown option $1" ;;
    *) out="$1" ;;
  esac
  shift
done
[ -n "$out" ] || fail "usage: deploy/tarball.sh [--debug] [--binary PATH] OUT.tar.gz"
command -v gzip >/dev/null || fail "gzip is required"

if [ -z "$binary" ]; then
  flags=(--locked -p rltp-carrier --bin rltp-carrier)
  [ "$profile" = release ] && flags+=(--release)
  cargo build "${flags[@]}"
  binary="${CARGO_TARGET_DIR:-target}/$profile/rltp-carrier"
fi
[ -x "$binary" ] || fail "no binary at $binary"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
install -D -m 0755 "$binary" "$root/usr/local/bin/rltp-carrier"
install -D -m 0644 deploy/carrier.toml "$root/etc/rltp-carrier/carrier.toml"
install -D -m 0644 deploy/rltp-carrier.service "$root/lib/systemd/system/rltp-carrier.service"
install -D -m 0644 deploy/99-rltp-carrier-quic.conf "$root/etc/sysctl.d/99-rltp-carrier-quic.conf"
bin="$root/usr/local/bin/rltp-carrier"
install -d "$root/usr/share/bash-completion/completions" "$root/usr/share/zsh/vendor-completions" \
  "$root/usr/share/fish/vendor_completions.d" "$root/usr/share/man/man1" "$root/usr/share/doc/rltp-carrier"
"$bin" completions bash >"$root/usr/share/bash-completion/completions/rltp-carrier"
"$bin" completions zsh >"$root/usr/share/zsh/vendor-completions/_rltp-carrier"
"$bin" completions fish >"$root/usr/share/fish/vendor_completions.d/rltp-carrier.fish"
"$bin" man --out-dir "$root/usr/share/man/man1"
gzip -9n "$root"/usr/share/man/man1/*.1
cp README.md ERRORS.md deploy/OPERATIONS.md deploy/grafana/carrier.json deploy/prometheus/alerts.yml \
  "$root/usr/share/doc/rltp-carrier/"
version=$("$bin" --version | awk '{print $2}')
tar --owner=0 --group=0 --numeric-owner --sort=name -czf "$out" -C "$root" .
echo "tarball $out"
echo "version $version"
