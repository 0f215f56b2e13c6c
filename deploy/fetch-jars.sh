#!/usr/bin/env bash
# Fetch the jars of dphhh's streaming infrastructure from Maven Central, as listed in deploy/pom.xml:
#   deploy/jars/kafka/   Kafka broker + tools + log4j2 binding   (used by deploy/kafka-*.sh)
#   deploy/jars/flink/   flink-sql-connector-kafka, flink-metrics-prometheus (used by the PyFlink job)
# ($DPHHH_JARS instead of deploy/jars and $DPHHH_STATE_DIR/log instead of var/log when set: an
# installed dphhh points them at its user cache and state folder.)
#
#   bash deploy/fetch-jars.sh [--force]
#
# Idempotent: a stamp file keyed by the hash of pom.xml makes a second run a no-op; editing pom.xml
# (e.g. bumping a version) makes the next run refetch everything into a fresh directory, which
# replaces deploy/jars/ only once Maven succeeded. Needs Maven (mvn) and a JDK (Java 17).
# Maven's own output goes to var/log/fetch-jars.log; its download cache is the usual ~/.m2.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
jars="${DPHHH_JARS:-$here/jars}"            # an installed dphhh: its user cache (stream/paths.py)
log_dir="${DPHHH_STATE_DIR:-$root/var}/log"
log="$log_dir/fetch-jars.log"

force=0
case "${1:-}" in
  "") ;;
  --force) force=1 ;;
  *) echo "fetch-jars: unknown argument '$1' (usage: fetch-jars.sh [--force])" >&2; exit 2 ;;
esac

stamp_name=".fetched-$(sha1sum "$here/pom.xml" | cut -c1-12)"
if [[ $force -eq 0 && -f "$jars/$stamp_name" ]] \
   && compgen -G "$jars/kafka/kafka_2.13-*.jar" >/dev/null \
   && compgen -G "$jars/flink/flink-sql-connector-kafka-*.jar" >/dev/null; then
  echo "fetch-jars: jars up to date in $jars"
  exit 0
fi

command -v mvn >/dev/null 2>&1 || {
  echo "fetch-jars: 'mvn' (Apache Maven 3.6+) not found on PATH; install it (Debian: apt-get install maven)" >&2
  exit 1
}
command -v java >/dev/null 2>&1 || {
  echo "fetch-jars: 'java' not found on PATH; install a JDK 17 (Debian: apt-get install openjdk-17-jdk-headless)" >&2
  exit 1
}

mkdir -p "$log_dir"
staging="$jars.staging.$$"
mkdir -p "$(dirname "$jars")"
trap 'rm -rf "$staging"' EXIT
rm -rf "$staging"

printf 'fetch-jars: fetching Kafka and Flink jars from Maven Central into %s ... ' "$jars"
start=$(date +%s)
if ! mvn -B -f "$here/pom.xml" -Djars.dir="$staging" package >"$log" 2>&1; then
  echo "failed"
  grep -E '^\[(ERROR|WARNING)\]' "$log" | tail -n 20 >&2 || tail -n 20 "$log" >&2
  echo "fetch-jars: Maven failed (full log: $log)" >&2
  exit 1
fi
for required in kafka/kafka_2.13-*.jar kafka/kafka-tools-[0-9]*.jar kafka/log4j-core-*.jar \
                flink/flink-sql-connector-kafka-*.jar flink/flink-metrics-prometheus-*.jar; do
  compgen -G "$staging/$required" >/dev/null || {
    echo "failed"
    echo "fetch-jars: Maven succeeded but $required is missing (full log: $log)" >&2
    exit 1
  }
done
touch "$staging/$stamp_name"

# Swap the complete set in: never leave a half-fetched or mixed-version deploy/jars/ behind.
rm -rf "$jars.old"
if [[ -d "$jars" ]]; then mv "$jars" "$jars.old"; fi
mv "$staging" "$jars"
rm -rf "$jars.old"
echo "done in $(( $(date +%s) - start )) s ($(ls "$jars/kafka" | wc -l) jars in kafka/, $(ls "$jars/flink" | wc -l) in flink/)"
