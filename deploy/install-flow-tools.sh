#!/usr/bin/env bash
# Install the flow collector chain of deploy/flow-pipeline.sh (idempotent):
#
#   bash deploy/install-flow-tools.sh            # Debian's softflowd and pmacct (nfacctd), apt-get
#   bash deploy/install-flow-tools.sh goflow2    # also goflow2, built from Go modules (optional)
#
# softflowd (exporter: reads a capture with -r, exports NetFlow v9 / IPFIX) and pmacct (its nfacctd
# collector; Debian builds it with --enable-kafka --enable-jansson, so its kafka plugin publishes
# JSON through librdkafka) come from Debian's mirrors; needs root or sudo. The packages' own
# services are not wanted (flow-pipeline.sh starts its own processes): they are stopped and
# disabled if the install started them. The apt output goes to var/log/install-flow-tools.log.
#
# goflow2 (github.com/netsampler/goflow2/v2, not packaged by Debian) is an alternative collector
# that publishes its own JSON (snake_case fields, nanosecond times). `goflow2` builds it with
# `go install` into var/flow-tools/bin/goflow2; it needs Go >= 1.23 on PATH or in /usr/local/go
# (Debian 12's golang-go is 1.19: too old) and the Go module proxy. DPHHH_GOFLOW2_VERSION picks
# the module version (default v2.2.6, the one tested).
#
# Also callable as `bash deploy/install-debian.sh flow-tools`.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
die() { echo "install-flow-tools: $*" >&2; exit 1; }

want_goflow2=0
case "${1:-}" in
  "") ;;
  goflow2) want_goflow2=1 ;;
  *) echo "install-flow-tools: usage: install-flow-tools.sh [goflow2]" >&2; exit 2 ;;
esac

versions() {
  local sf nf
  sf="$(dpkg-query -W -f='${Version}' softflowd 2>/dev/null || echo '?')"
  nf="$(dpkg-query -W -f='${Version}' pmacct 2>/dev/null || echo '?')"
  echo "softflowd $sf, pmacct $nf"
}

if command -v softflowd >/dev/null 2>&1 && command -v nfacctd >/dev/null 2>&1; then
  echo "install-flow-tools: already installed ($(versions))"
else
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found (not Debian): install softflowd and pmacct (nfacctd with the kafka plugin) yourself"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "need root or sudo to apt-get install softflowd pmacct"
    sudo="sudo"
  fi
  mkdir -p "$root/var/log"
  log="$root/var/log/install-flow-tools.log"
  printf 'install-flow-tools: apt-get install softflowd pmacct ... '
  export DEBIAN_FRONTEND=noninteractive
  if ! { $sudo apt-get install -y --no-install-recommends softflowd pmacct >"$log" 2>&1 ||
         { $sudo apt-get update >>"$log" 2>&1 &&
           $sudo apt-get install -y --no-install-recommends softflowd pmacct >>"$log" 2>&1; }; }; then
    echo "failed"
    tail -n 20 "$log" >&2
    die "apt-get failed (full log: $log)"
  fi
  # The packages enable system services (softflowd on an interface, nfacctd/pmacctd with
  # /etc/pmacct configs); flow-pipeline.sh runs its own processes, so keep those off.
  for svc in softflowd nfacctd pmacctd sfacctd uacctd; do
    $sudo service "$svc" stop >/dev/null 2>&1 || true
    if command -v systemctl >/dev/null 2>&1; then $sudo systemctl disable "$svc" >/dev/null 2>&1 || true; fi
  done
  echo "done ($(versions))"
fi

# The kafka plugin is what the pipeline needs from nfacctd: fail loudly if this build lacks it.
if ! nfacctd -V 2>/dev/null | sed -n '/^Plugins:/,$p' | grep -qx kafka; then
  die "this nfacctd ($(nfacctd -V 2>/dev/null | head -n 1)) has no kafka plugin; flow-pipeline.sh needs one (Debian's pmacct has it)"
fi

if (( want_goflow2 )); then
  bin_dir="$root/var/flow-tools/bin"
  version="${DPHHH_GOFLOW2_VERSION:-v2.2.6}"
  if [[ -x "$bin_dir/goflow2" && -f "$bin_dir/goflow2.version" && "$(cat "$bin_dir/goflow2.version")" == "$version" ]]; then
    echo "install-flow-tools: goflow2 $version already built ($bin_dir/goflow2)"
    exit 0
  fi
  go_bin="$(command -v go || true)"
  [[ -n "$go_bin" ]] || { [[ -x /usr/local/go/bin/go ]] && go_bin=/usr/local/go/bin/go; }
  [[ -n "$go_bin" ]] || die "goflow2 needs Go >= 1.23 to build (not found on PATH nor in /usr/local/go)"
  go_version="$("$go_bin" env GOVERSION 2>/dev/null || true)"   # e.g. go1.26.8
  if [[ ! "$go_version" =~ ^go1\.([0-9]+) ]] || (( BASH_REMATCH[1] < 23 )); then
    die "goflow2 needs Go >= 1.23 to build; $go_bin is ${go_version:-too old to tell}"
  fi
  mkdir -p "$bin_dir" "$root/var/log"
  log="$root/var/log/install-goflow2.log"
  printf 'install-flow-tools: go install github.com/netsampler/goflow2/v2/cmd/goflow2@%s ... ' "$version"
  if ! GOBIN="$bin_dir" GOTOOLCHAIN=local "$go_bin" install "github.com/netsampler/goflow2/v2/cmd/goflow2@$version" >"$log" 2>&1; then
    echo "failed"
    tail -n 20 "$log" >&2
    die "building goflow2 failed (full log: $log)"
  fi
  echo "$version" >"$bin_dir/goflow2.version"
  echo "done ($bin_dir/goflow2, $go_version)"
fi
