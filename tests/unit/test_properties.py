import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from minikafka.config import BrokerConfig, ConfigError
from minikafka.storage.properties import parse_properties, read_properties


def test_kafka_server_properties_forms():
    text = ("# a comment\n! another\n\n  node.id=7\nlisteners = PLAINTEXT://127.0.0.1:9092  \n"
            "log.dirs: /tmp/data\nnum.partitions 3\n\tdelete.topic.enable\t=\tfalse\nbare.key\nempty.value=\n")
    assert parse_properties(text) == {
        "node.id": "7", "listeners": "PLAINTEXT://127.0.0.1:9092", "log.dirs": "/tmp/data", "num.partitions": "3",
        "delete.topic.enable": "false", "bare.key": "", "empty.value": "",
    }


def test_the_first_separator_ends_the_key_and_the_value_keeps_the_rest():
    assert parse_properties("a=b=c\nx:y=z\nurl=http://h:1/p?q=r\nk==v\n") == {
        "a": "b=c", "x": "y=z", "url": "http://h:1/p?q=r", "k": "=v"}


def test_meta_properties_and_partition_metadata_as_kafka_writes_them():
    meta = "#\n#Thu Jan 01 00:00:00 UTC 2025\nnode.id=1\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n"
    assert parse_properties(meta) == {"node.id": "1", "version": "1", "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg"}
    assert parse_properties("version: 0\ntopic_id: AAECAwQFBgcICQoLDA0ODw") == {
        "version": "0", "topic_id": "AAECAwQFBgcICQoLDA0ODw"}


def test_continuation_lines_escapes_and_line_breaks():
    text = ("servers=a:1,\\\n    b:2,\\\n\n   c:3\r\nkey\\=with\\:seps\\ and\\ blanks=v\r"
            "tab=x\\ty\\u00e9\\\\\nlast=z\\")
    assert parse_properties(text) == {
        "servers": "a:1,b:2,c:3", "key=with:seps and blanks": "v", "tab": "x\tyé\\", "last": "z"}


def test_a_comment_is_only_a_comment_at_the_start_of_a_line():
    assert parse_properties("a=#not a comment\n  # comment\nb=1 ! still b\nc=x\\\n#continued\n") == {
        "a": "#not a comment", "b": "1 ! still b", "c": "x#continued"}


def test_repeated_key_keeps_the_last_value():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_malformed_unicode_escape_is_refused(tmp_path):
    with pytest.raises(ValueError, match="uxxxx"):
        parse_properties("a=\\u12x4\n")
    props = tmp_path / "server.properties"
    props.write_text("node.id=\\u12\n")
    with pytest.raises(ConfigError, match="server.properties"):
        BrokerConfig.from_sources(props)


def test_broker_config_reads_its_file_through_the_parser(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("node.id = 4\nnum.partitions: 2\n")
    assert read_properties(props) == {"node.id": "4", "num.partitions": "2"}
    config = BrokerConfig.from_sources(props, {"num.partitions": 6})
    assert config.node_id == 4 and config.get("num.partitions") == 6


_KEYS = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), min_size=1, max_size=10)


def _escape(text: str, key: bool) -> str:
    escaped = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\f", "\\f")
    if key:
        for char in "=: #!":
            escaped = escaped.replace(char, "\\" + char)
    return escaped


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS.map(str.strip).filter(bool), _KEYS.map(str.strip), max_size=5))
def test_escaped_properties_parse_back(props):
    text = "".join(f"{_escape(key, True)}={_escape(value, False)}\n" for key, value in props.items())
    assert parse_properties(text) == props
