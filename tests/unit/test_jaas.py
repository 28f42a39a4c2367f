import pytest

from minikafka.broker.security.jaas import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    JaasLoginModule,
    parse_jaas_config,
)
from minikafka.config import ConfigError

PROPERTY = "listener.name.sasl_plaintext.plain.sasl.jaas.config"


def test_kafka_docs_plain_example():
    value = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
             'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert parse_jaas_config(value, PROPERTY) == [JaasLoginModule(PLAIN_LOGIN_MODULE, "required", {
        "username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "alice-secret"})]


def test_kafka_docs_scram_example_has_no_options():
    assert parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required;", PROPERTY) == [
        JaasLoginModule(SCRAM_LOGIN_MODULE, "required", {})]


def test_several_modules_over_lines_with_comments_and_any_case_of_flag():
    value = """
        // the first module
        a.B required x=a1 /* a bare value may hold digits, not start with one */ ;
        c.D Optional  y = "two words" ;
        e.F SUFFICIENT; g.H requisite z=$v_-w.9;
    """
    assert parse_jaas_config(value, PROPERTY) == [
        JaasLoginModule("a.B", "required", {"x": "a1"}),
        JaasLoginModule("c.D", "optional", {"y": "two words"}),
        JaasLoginModule("e.F", "sufficient", {}),
        JaasLoginModule("g.H", "requisite", {"z": "$v_-w.9"}),
    ]


def test_quoted_values_and_the_escapes_of_kafkas_tokenizer():
    value = r"""m required a="x;y=z" b='single "quoted"' c="q\"b\\s\tt\nn" d="\101\1012\477" e="" f="é ü";"""
    assert parse_jaas_config(value, PROPERTY)[0].options == {
        "a": "x;y=z", "b": 'single "quoted"', "c": 'q"b\\s\tt\nn', "d": "AA2'7", "e": "", "f": "é ü"}


def test_a_quoted_value_ends_at_its_line_and_a_repeated_key_keeps_the_last_value():
    assert parse_jaas_config('m required a="open\n b="one" b=two;', PROPERTY)[0].options == {
        "a": "open", "b": "two"}


def test_a_lone_slash_comments_out_the_rest_of_the_line():
    assert parse_jaas_config("m required a=x/y;\n;", PROPERTY)[0].options == {"a": "x"}


@pytest.mark.parametrize("value, message", [
    ("", "Login module not specified in JAAS config"),
    ("  // only a comment\n", "Login module not specified in JAAS config"),
    ('"" required;', "Login module not specified in JAAS config"),
    ("m", "Login module control flag not specified in JAAS config"),
    ("m ;", "Login module control flag is not available in the JAAS config"),
    ("m mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    ("m required", "JAAS config entry not terminated by semi-colon"),
    ('m required a="b"', "JAAS config entry not terminated by semi-colon"),
    ("m required; n optional x=y", "JAAS config entry not terminated by semi-colon"),
    ("m required a;", "Value not specified for key 'a' in JAAS config"),
    ("m required a=;", "Value not specified for key 'a' in JAAS config"),
    ("m required a=12;", "Value not specified for key 'a' in JAAS config"),  # a number, as Kafka reads it
    ("m required a=-b;", "Value not specified for key 'a' in JAAS config"),
    ("m required =b;", "Value not specified for key 'null' in JAAS config"),
])
def test_what_kafka_refuses_names_the_property(value, message):
    with pytest.raises(ConfigError) as error:
        parse_jaas_config(value, PROPERTY)
    assert str(error.value) == f"Invalid value for configuration {PROPERTY}: {message}"


def test_an_error_never_shows_the_passwords():
    with pytest.raises(ConfigError) as error:
        parse_jaas_config('m required user_admin="admin-secret" password="admin-secret"', PROPERTY)
    assert "admin-secret" not in str(error.value)
