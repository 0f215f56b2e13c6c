#!/usr/bin/env bash
# Install Debian's tor-geoipdb package, which provides /usr/share/tor/geoip: the real allocated
# IPv4 ranges ("start_int,end_int,CC" lines, CC BY-SA 4.0) that benchmarks/accuracy.py draws its
# large synthetic Zipf stream from. Idempotent: does nothing but check when the file is present.
#
#   bash deploy/fetch-geoip.sh
#
# The package depends on the tor daemon package (installed, not configured or started by this
# script). Uses sudo only when not already root. Exits non-zero if the file is still missing afterwards.
set -euo pipefail

GEOIP_FILE=/usr/share/tor/geoip

if [ -s "$GEOIP_FILE" ]; then
    echo "fetch-geoip: $GEOIP_FILE already present ($(grep -vc '^#' "$GEOIP_FILE") ranges)"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "fetch-geoip: apt-get not found; install the Debian/Ubuntu package 'tor-geoipdb' by other means" >&2
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
else
    echo "fetch-geoip: not root and sudo is not available; run as root: apt-get install tor-geoipdb" >&2
    exit 1
fi

echo "fetch-geoip: installing tor-geoipdb ..."
"${SUDO[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends tor-geoipdb

if [ ! -s "$GEOIP_FILE" ]; then
    echo "fetch-geoip: tor-geoipdb installed but $GEOIP_FILE is missing or empty" >&2
    exit 1
fi
echo "fetch-geoip: ok, $GEOIP_FILE has $(grep -vc '^#' "$GEOIP_FILE") ranges"
