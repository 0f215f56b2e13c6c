#!/usr/bin/env bash
# Install Debian's Prometheus server (package `prometheus`) if no `prometheus` binary is on PATH.
# Used by the monitoring integration test and by anyone who wants to scrape a local job with
# deploy/prometheus/prometheus.yml. Needs root (or sudo) and Debian's package mirrors.
#   bash deploy/install-prometheus.sh
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  echo "install-prometheus: $(prometheus --version 2>&1 | head -n 1)"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "install-prometheus: apt-get not found (not Debian): install Prometheus 2.x yourself" >&2; exit 1; }
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-prometheus: need root or sudo to apt-get install prometheus" >&2; exit 1; }
  sudo="sudo"
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_dir="$(dirname "$here")/var/log"
mkdir -p "$log_dir"
log="$log_dir/install-prometheus.log"
printf 'install-prometheus: apt-get install prometheus (Debian) ... '
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get install -y --no-install-recommends prometheus >"$log" 2>&1 ||
       { $sudo apt-get update >>"$log" 2>&1 && $sudo apt-get install -y --no-install-recommends prometheus >>"$log" 2>&1; }; }; then
  echo "failed"
  tail -n 20 "$log" >&2
  echo "install-prometheus: apt-get failed (full log: $log)" >&2
  exit 1
fi
# The package's service is not wanted here: tests start their own server on a free port.
$sudo service prometheus stop >/dev/null 2>&1 || true
echo "done ($(prometheus --version 2>&1 | head -n 1))"
