#!/usr/bin/env bash
# Install Debian's Chromium (package `chromium`, /usr/bin/chromium) if it is missing; the dashboard's
# browser test drives it headless through Playwright (no browser download).
#   bash deploy/install-chromium.sh
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "install-chromium: $(chromium --version 2>/dev/null | head -n 1)"
  exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "install-chromium: apt-get not found (not Debian): install Chromium yourself" >&2; exit 1; }
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-chromium: need root or sudo to apt-get install chromium" >&2; exit 1; }
  sudo="sudo"
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log_dir="$(dirname "$here")/var/log"
mkdir -p "$log_dir"
log="$log_dir/install-chromium.log"
printf 'install-chromium: apt-get install chromium (Debian) ... '
export DEBIAN_FRONTEND=noninteractive
if ! { $sudo apt-get install -y --no-install-recommends chromium >"$log" 2>&1 ||
       { $sudo apt-get update >>"$log" 2>&1 && $sudo apt-get install -y --no-install-recommends chromium >>"$log" 2>&1; }; }; then
  echo "failed"
  tail -n 20 "$log" >&2
  echo "install-chromium: apt-get failed (full log: $log)" >&2
  exit 1
fi
echo "done ($(chromium --version 2>/dev/null | head -n 1))"
