# Shared by deploy/kafka-start.sh, kafka-stop.sh, kafka-topics.sh and kafka-transactions.sh
# (sourced, not run).
# Defines the paths and ports of the development broker and a few helpers.

deploy_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
root_dir="$(dirname "$deploy_dir")"
kafka_conf_dir="$deploy_dir/kafka"
# DPHHH_JARS / DPHHH_STATE_DIR: where the fetched jars and the run state live (set by an installed
# dphhh: a user cache and ./var, never the package's folder); default the checkout's deploy/jars, var
state_dir="${DPHHH_STATE_DIR:-$root_dir/var}"
kafka_jars="${DPHHH_JARS:-$deploy_dir/jars}/kafka"
# DPHHH_KAFKA_VAR: a second, independent broker keeps its own folder (relative = from the state dir's parent).
kafka_var="${DPHHH_KAFKA_VAR:-$state_dir/kafka}"
[[ "$kafka_var" = /* ]] || kafka_var="$(dirname "$state_dir")/$kafka_var"
kafka_data="$kafka_var/data"
kafka_logs="$kafka_var/logs"
kafka_pid_file="$kafka_var/kafka.pid"
kafka_config="$kafka_var/server.properties"

kafka_port="${DPHHH_KAFKA_PORT:-9092}"
kafka_controller_port="${DPHHH_KAFKA_CONTROLLER_PORT:-9093}"
kafka_bootstrap="127.0.0.1:$kafka_port"

kafka_die() { echo "${kafka_script:-kafka}: $*" >&2; exit 1; }

kafka_check_port() {  # NAME VALUE
  [[ "$2" =~ ^[0-9]+$ ]] && (( $2 >= 1 && $2 <= 65535 )) \
    || kafka_die "$1 must be a TCP port number (1-65535), got '$2'"
}
kafka_check_port DPHHH_KAFKA_PORT "$kafka_port"
kafka_check_port DPHHH_KAFKA_CONTROLLER_PORT "$kafka_controller_port"
[[ "$kafka_port" != "$kafka_controller_port" ]] \
  || kafka_die "DPHHH_KAFKA_PORT and DPHHH_KAFKA_CONTROLLER_PORT must differ (both are $kafka_port)"

# DPHHH_KAFKA_SECURITY: plaintext (default) or sasl_ssl (client listener SASL_SSL, PLAIN mechanism;
# the TLS material and passwords are generated once in $kafka_var/secrets by kafka/security.sh).
kafka_security="${DPHHH_KAFKA_SECURITY:-plaintext}"
case "$kafka_security" in
  plaintext) kafka_listener_name=PLAINTEXT ;;
  sasl_ssl) kafka_listener_name=SASL_SSL ;;
  *) kafka_die "DPHHH_KAFKA_SECURITY must be plaintext or sasl_ssl, got '$kafka_security'" ;;
esac
kafka_secrets="$kafka_var/secrets"

kafka_require_java() {
  command -v java >/dev/null 2>&1 \
    || kafka_die "'java' not found on PATH; Kafka 4 needs Java 17+ (Debian: apt-get install openjdk-17-jre-headless)"
}

# Prints the broker's pid and succeeds if the pid file names a live Kafka process started from this
# checkout; removes a stale pid file otherwise.
kafka_running_pid() {
  local pid
  [[ -f "$kafka_pid_file" ]] || return 1
  pid="$(cat "$kafka_pid_file" 2>/dev/null || true)"
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
     && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka\.Kafka $kafka_config"; then
    echo "$pid"
    return 0
  fi
  rm -f "$kafka_pid_file"
  return 1
}

# True if something listens on 127.0.0.1:PORT.
kafka_port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# Runs a Kafka tool class with the fetched jars; tool logging (warnings only) goes to stderr.
kafka_tool() {
  local class="$1"; shift
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
       -Dlog4j2.configurationFile="$kafka_conf_dir/tools-log4j2.properties" \
       -cp "$kafka_jars/*" "$class" "$@"
}

# The admin scripts (kafka-topics.sh, kafka-transactions.sh) need a broker on the client port, Java
# and the fetched tools jar; dies naming the first that is missing (the broker first: starting it
# with kafka-start.sh also fetches the jars).
kafka_require_admin() {
  kafka_port_open "$kafka_port" \
    || kafka_die "no broker listening on $kafka_bootstrap; start it with deploy/kafka-start.sh"
  kafka_require_java
  compgen -G "$kafka_jars/kafka-tools-[0-9]*.jar" >/dev/null \
    || kafka_die "Kafka jars missing in $kafka_jars; run deploy/fetch-jars.sh (or deploy/kafka-start.sh)"
}

# Runs a Kafka admin tool class against the broker; a SASL_SSL test broker (DPHHH_KAFKA_SECURITY=
# sasl_ssl) is reached with its generated client settings.
kafka_admin_tool() {
  local class="$1"; shift
  local extra=()
  [[ "$kafka_security" == sasl_ssl ]] && extra=(--command-config "$kafka_secrets/client.properties")
  kafka_tool "$class" --bootstrap-server "$kafka_bootstrap" "${extra[@]}" "$@"
}

kafka_seconds() {  # NAME DEFAULT: prints the whole seconds in $NAME (or DEFAULT), dies otherwise
  local value="${!1:-$2}"
  [[ "$value" =~ ^[0-9]+$ ]] || kafka_die "$1 must be whole seconds, got '$value'"
  echo "$value"
}
