# SASL_SSL material of a secured development broker (DPHHH_KAFKA_SECURITY=sasl_ssl); sourced by
# deploy/kafka-start.sh after kafka/common.sh, not run.
#
# kafka_security_material   makes, once, in $kafka_secrets (mode 700; files mode 600 but ca.pem):
#   ca.p12, ca.pem         a self-signed CA (JDK keytool) and its certificate in PEM, for clients
#   broker.p12             the broker's key and certificate (signed by the CA; IP 127.0.0.1, localhost)
#   store.password         the password of both PKCS12 stores
#   admin.password         the broker's own SASL/PLAIN account "admin"
#   client.password        the client account "dphhh"
#   client.jaas            the sasl.jaas.config value of "dphhh" (for `"file:..."` in kafka.extra)
#   client.properties      the Java client settings (Kafka's CLI tools: --command-config FILE)
# Passwords are random, never printed, and never on a command line (keytool reads them with
# -storepass:env). Delete the secrets folder (broker stopped) to make new ones.
# kafka_security_overlay    prints deploy/kafka/sasl-ssl.properties with ports and passwords filled in.

kafka_random_password() {
  local raw
  raw="$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
  printf '%s' "${raw:0:24}"
}

kafka_keytool() {  # ARGS...: keytool with the store password from the environment (never in argv)
  DPHHH_KAFKA_STOREPASS="$store_password" keytool -noprompt "$@" \
    -storepass:env DPHHH_KAFKA_STOREPASS >>"$work/keytool.log" 2>&1 \
    || { cat "$work/keytool.log" >&2; rm -rf "$work"; kafka_die "keytool $1 failed"; }
}

kafka_security_material() {
  [[ -f "$kafka_secrets/client.properties" ]] && return 0
  command -v keytool >/dev/null 2>&1 \
    || kafka_die "'keytool' (JDK) not found on PATH; it makes the broker's TLS certificate"
  mkdir -p "$kafka_var"
  local work store_password admin_password client_password
  work="$(mktemp -d "$kafka_var/.secrets.XXXXXX")"  # mode 700
  store_password="$(kafka_random_password)"
  admin_password="$(kafka_random_password)"
  client_password="$(kafka_random_password)"
  (
    umask 077
    printf '%s\n' "$store_password" >"$work/store.password"
    printf '%s\n' "$admin_password" >"$work/admin.password"
    printf '%s\n' "$client_password" >"$work/client.password"
    printf 'org.apache.kafka.common.security.plain.PlainLoginModule required username="dphhh" password="%s";\n' \
      "$client_password" >"$work/client.jaas"
  )
  kafka_keytool -genkeypair -alias ca -keyalg RSA -keysize 2048 -validity 3650 -dname "CN=dphhh test CA" \
    -ext bc:c -ext ku:c=keyCertSign,cRLSign -keystore "$work/ca.p12" -storetype PKCS12
  kafka_keytool -exportcert -rfc -alias ca -keystore "$work/ca.p12" -file "$work/ca.pem"
  kafka_keytool -genkeypair -alias broker -keyalg RSA -keysize 2048 -validity 3650 -dname "CN=127.0.0.1" \
    -keystore "$work/broker.p12" -storetype PKCS12
  kafka_keytool -certreq -alias broker -keystore "$work/broker.p12" -file "$work/broker.csr"
  kafka_keytool -gencert -alias ca -keystore "$work/ca.p12" -infile "$work/broker.csr" -outfile "$work/broker.pem" \
    -rfc -validity 3650 -ext "SAN=IP:127.0.0.1,DNS:localhost" -ext ku:c=digitalSignature,keyEncipherment \
    -ext eku=serverAuth
  kafka_keytool -importcert -alias ca -file "$work/ca.pem" -keystore "$work/broker.p12"
  kafka_keytool -importcert -alias broker -file "$work/broker.pem" -keystore "$work/broker.p12"
  rm -f "$work/broker.csr" "$work/keytool.log"
  chmod 600 "$work"/*.p12
  chmod 644 "$work/ca.pem"
  (
    umask 077
    printf '%s\n' "security.protocol=SASL_SSL" "sasl.mechanism=PLAIN" \
      "sasl.jaas.config=$(cat "$work/client.jaas")" \
      "ssl.truststore.type=PEM" "ssl.truststore.location=$kafka_secrets/ca.pem" >"$work/client.properties"
  )
  rm -rf "$kafka_secrets"  # an incomplete earlier attempt (no client.properties)
  mv "$work" "$kafka_secrets"
  echo "${kafka_script:-kafka}: made the SASL_SSL material in $kafka_secrets (CA: ca.pem, user dphhh: client.password)"
}

kafka_security_overlay() {
  local text store_password admin_password client_password
  text="$(grep -v '^#' "$kafka_conf_dir/sasl-ssl.properties")"  # its comments name the placeholders
  store_password="$(<"$kafka_secrets/store.password")"
  admin_password="$(<"$kafka_secrets/admin.password")"
  client_password="$(<"$kafka_secrets/client.password")"
  text="${text//@KAFKA_PORT@/$kafka_port}"
  text="${text//@CONTROLLER_PORT@/$kafka_controller_port}"
  text="${text//@SECRETS_DIR@/$kafka_secrets}"
  text="${text//@STORE_PASSWORD@/$store_password}"
  text="${text//@ADMIN_PASSWORD@/$admin_password}"
  text="${text//@CLIENT_PASSWORD@/$client_password}"
  printf '\n%s\n' "$text"
}
