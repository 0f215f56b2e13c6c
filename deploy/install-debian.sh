#!/usr/bin/env bash
# Install a Debian package the monitoring tests and tools need, if its command is missing:
#   bash deploy/install-debian.sh prometheus   # Debian's Prometheus server (/usr/bin/prometheus)
#   bash deploy/install-debian.sh chromium     # Debian's Chromium, driven headless by the dashboard's browser test
#   bash deploy/install-debian.sh flow-tools   # softflowd + pmacct (nfacctd): runs deploy/install-flow-tools.sh
# Needs root (or sudo) and Debian's package mirrors; the apt output goes to var/log/install-<package>.log.
set -euo pipefail
package="${1:-}"
case "$package" in
  prometheus|chromium) ;;
  flow-tools) exec bash "$(dirname "${BASH_SOURCE[0]}")/install-flow-tools.sh" ;;
  *) echo "install-debian: usage: install-debian.sh prometheus|chromium|flow-tools" >&2; exit 2 ;;
esac
if command -v "$package" >/dev/null 2>&1; then
  echo "install-debian: $("$package" --version 2>/dev/null | head -n 1)"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "install-debian: apt-get not found (not Debian): install $package yourself" >&2; exit 1; }
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-debian: need root or sudo to apt-get install $package" >&2; exit 1; }
  sudo="sudo"
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_dir="$(dirname "$here")/var/log"
mkdir -p "$log_dir"
log="$log_dir/install-$package.log"
# one apt-get at a time (parallel test workers may ask together): wait for the other, then look again
exec 9>"$log_dir/install-debian.lock"
flock 9
if command -v "$package" >/dev/null 2>&1; then
  echo "install-debian: $("$package" --version 2>/dev/null | head -n 1)"
  exit 0
fi
printf 'install-debian: apt-get install %s ... ' "$package"
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get install -y --no-install-recommends "$package" >"$log" 2>&1 ||
       { $sudo apt-get update >>"$log" 2>&1 && $sudo apt-get install -y --no-install-recommends "$package" >>"$log" 2>&1; }; }; then
  echo "failed"
  tail -n 20 "$log" >&2
  echo "install-debian: apt-get failed (full log: $log)" >&2
  exit 1
fi
if [[ "$package" == prometheus ]]; then
  # the package's own service is not wanted: tests and users start their own server
  $sudo service prometheus stop >/dev/null 2>&1 || true
fi
echo "done ($("$package" --version 2>/dev/null | head -n 1))"
