"""Kafka's Java client option names → kafka-python keyword arguments (connectors.kafka_io)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer

from dphhh.connectors.kafka_io import client_kwargs, java_client_properties, parse_jaas_login

SECRET = "s3cr3t-Pa55"
PLAIN = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="dphhh" password="{SECRET}";'
SCRAM = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{SECRET}";'


def _sasl_ssl(**extra: str) -> dict[str, str]:
    return {
        "bootstrap.servers": "a:9093, b:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/ca.pem",
        **extra,
    }


def test_sasl_ssl_options_become_kafka_python_arguments() -> None:
    """A SASL_SSL PLAIN configuration with a PEM truststore maps to kafka-python's own arguments."""
    got = client_kwargs(_sasl_ssl(**{"ssl.endpoint.identification.algorithm": ""}))
    assert got == {
        "bootstrap_servers": ["a:9093", "b:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "dphhh",
        "sasl_plain_password": SECRET,
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }
    assert client_kwargs(_sasl_ssl(**{"ssl.endpoint.identification.algorithm": "https"}))["ssl_check_hostname"]


def test_every_kafka_python_client_accepts_the_arguments() -> None:
    """The translated arguments are known to kafka-python's producer, consumer and admin client."""
    got = client_kwargs(
        _sasl_ssl(
            **{
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": "/etc/me.pem",
                "ssl.key.password": "k",
                "client.id": "x",
                "request.timeout.ms": "40000",
                "linger.ms": "5",
                "partition.discovery.interval.ms": "1000",
            }
        )
    )
    for cls in (KafkaProducer, KafkaConsumer, KafkaAdminClient):
        assert set(got) <= set(cls.DEFAULT_CONFIG), cls.__name__
    assert got["ssl_certfile"] == "/etc/me.pem" and got["ssl_password"] == "k" and got["request_timeout_ms"] == 40000


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_mechanisms_take_the_scram_login(mechanism: str) -> None:
    """SCRAM mechanisms read username and password from a ScramLoginModule entry."""
    got = client_kwargs(_sasl_ssl(**{"sasl.mechanism": mechanism, "sasl.jaas.config": SCRAM}))
    assert (got["sasl_mechanism"], got["sasl_plain_username"], got["sasl_plain_password"]) == (mechanism, "u", SECRET)


def test_java_only_options_are_dropped() -> None:
    """Options that only concern the Java clients do not reach kafka-python."""
    got = client_kwargs(
        _sasl_ssl(
            **{
                "ssl.truststore.type": "PEM",
                "ssl.protocol": "TLSv1.3",
                "acks": "all",
                "isolation.level": "read_committed",
                "client.id.prefix": "p",
            }
        )
    )
    assert not {"ssl_protocol", "acks", "isolation_level", "client_id_prefix", "ssl_truststore_type"} & set(got)


def test_plaintext_default_is_unchanged() -> None:
    """Plain bootstrap options map as before: a server list and the protocol."""
    assert client_kwargs({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "PLAINTEXT"}) == {
        "bootstrap_servers": ["127.0.0.1:9092"],
        "security_protocol": "PLAINTEXT",
    }


@pytest.mark.parametrize(
    "options, key",
    [
        ({"sasl.plain.password": SECRET}, "sasl.plain.password"),
        ({"sasl.login.callback.handler.class": SECRET}, "sasl.login.callback.handler.class"),
        (_sasl_ssl(**{"ssl.truststore.type": "JKS", "ssl.truststore.password": SECRET}), "ssl.truststore.location"),
        (_sasl_ssl(**{"sasl.jaas.config": f"nonsense {SECRET}"}), "sasl.jaas.config"),
        (_sasl_ssl(**{"sasl.jaas.config": PLAIN.replace('username="dphhh" ', "")}), "sasl.jaas.config"),
        (_sasl_ssl(**{"sasl.mechanism": "SCRAM-SHA-256"}), "sasl.jaas.config"),
        (_sasl_ssl(**{"sasl.mechanism": "GSSAPI"}), "sasl.mechanism"),
        ({k: v for k, v in _sasl_ssl().items() if k != "sasl.mechanism"}, "sasl.mechanism"),
        ({"security.protocol": "PLAINTEXT", "sasl.jaas.config": PLAIN}, "sasl.jaas.config"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        (_sasl_ssl(**{"ssl.endpoint.identification.algorithm": SECRET}), "ssl.endpoint.identification.algorithm"),
        ({"request.timeout.ms": SECRET}, "request.timeout.ms"),
    ],
)
def test_unusable_options_name_the_key_and_never_the_value(options: dict[str, str], key: str) -> None:
    """An option kafka-python cannot honour is a ValueError naming the option, not its (secret) value."""
    with pytest.raises(ValueError, match=rf"^kafka options: {key.replace('.', r'[.]')} ") as err:
        client_kwargs(options)
    assert SECRET not in str(err.value)


def test_jaas_entry_parsing_handles_quotes_and_escapes() -> None:
    """Quoted values keep spaces, semicolons and escaped quotes; unquoted words work too."""
    module, opts = parse_jaas_login('x.y.PlainLoginModule required username=bob password="a \\"b\\"; c" debug=true;')
    assert module == "x.y.PlainLoginModule" and opts == {"username": "bob", "password": 'a "b"; c', "debug": "true"}
    with pytest.raises(ValueError, match="sasl.jaas.config"):
        parse_jaas_login(PLAIN + " " + PLAIN)


def test_java_properties_relocate_the_login_module_for_the_shaded_connector() -> None:
    """The Flink job's properties skip bootstrap.servers and name the shaded login module class."""
    props = java_client_properties(_sasl_ssl())
    assert "bootstrap.servers" not in props and props["security.protocol"] == "SASL_SSL"
    assert props["sasl.jaas.config"].startswith(
        "org.apache.flink.kafka.shaded.org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    assert java_client_properties(_sasl_ssl(), shaded=False)["sasl.jaas.config"] == PLAIN
