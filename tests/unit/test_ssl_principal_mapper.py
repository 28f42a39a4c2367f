"""ssl.principal.mapping.rules as Kafka's SslPrincipalMapper parses and applies them."""
import pytest

from minikafka.broker.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper
from minikafka.config import ConfigError


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules):
    SslPrincipalMapper.from_rules(rules)


@pytest.mark.parametrize("rules", [
    "default",
    "DEFAUL",
    "DEFAULT/L",
    "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(.*,OU=ServiceUsers.*$/$1/",  # not a regular expression
])
def test_invalid_rules_name_the_property(rules):
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper.from_rules(rules)


def test_the_first_matching_rule_gives_the_name():
    mapper = SslPrincipalMapper.from_rules(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.get_name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.get_name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.get_name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.get_name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.get_name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


def test_the_documented_example():
    mapper = SslPrincipalMapper.from_rules(
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT")
    assert mapper.get_name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.get_name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    assert mapper.get_name("O=Unknown,cn=Bob.Smith,C=Unknown") == "bob.smith"
    assert mapper.get_name("O=Unknown,C=Unknown") == "O=Unknown,C=Unknown"


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # Empty rules are ignored.
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # Escaped slashes and commas stay inside their rule.
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_are_split_as_kafka_splits_them(expected, rules):
    assert str(SslPrincipalMapper.from_rules(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_an_escaped_comma_in_a_name():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.get_name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_escapes_in_a_replacement_are_literal():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=([a-z]+)$/\\/\\$1\\\\$1/")
    assert mapper.get_name("CN=alice") == "/$1\\alice"


def test_no_matching_rule_is_an_error_as_in_kafka():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule) as raised:
        mapper.get_name("CN=alice,OU=eng")
    assert isinstance(raised.value, ValueError)
    assert str(raised.value) == "No rules apply to CN=alice,OU=eng, rules [RULE:^CN=(.*?),OU=ServiceUsers.*$/$1]"
    with pytest.raises(NoMatchingRule):
        SslPrincipalMapper.from_rules("").get_name("CN=alice")


def test_a_rule_must_match_the_whole_name():
    mapper = SslPrincipalMapper.from_rules("RULE:CN=([a-z]+)/$1/")
    with pytest.raises(NoMatchingRule):
        mapper.get_name("CN=alice,OU=eng")
    assert mapper.get_name("CN=alice") == "alice"


def test_every_match_is_replaced_as_javas_replace_all():
    assert SslPrincipalMapper.from_rules("RULE:.*/x/").get_name("abc") == "xx"
    assert SslPrincipalMapper.from_rules("RULE:[a-z]*/<$0>/U").get_name("abc") == "<ABC><>"


@pytest.mark.parametrize(("replacement", "name"), [
    ("$1@$2", "alice@eng"),
    ("$1@$4", "alice@$4"),  # no group 4: literal, as Kafka intends
    ("$12", "alice2"),  # group 12 does not exist: group 1, then a literal 2
    ("$0", "CN=alice,OU=eng"),
    ("$01", "alice"),  # as in Java: the digits after the first join it while they name a group
    ("${user}.${unit}", "alice.eng"),
    ("$2$3", "eng$3"),
])
def test_group_references(replacement, name):
    rules = f"RULE:^CN=(?P<user>[a-z]+),OU=(?P<unit>[a-z]+)$/{replacement}/"
    assert SslPrincipalMapper.from_rules(rules).get_name("CN=alice,OU=eng") == name


@pytest.mark.parametrize("rule", [
    "RULE:^CN=alice$/$1/",  # a group reference without groups
    "RULE:^CN=(alice)$/$x/",
    "RULE:^CN=(alice)$/cost $/",
    "RULE:^CN=(alice)$/${nobody}/",
    "RULE:^CN=(alice)$/${user/",
])
def test_replacements_java_would_reject_are_refused(rule):
    with pytest.raises(ConfigError, match=r"ssl\.principal\.mapping\.rules"):
        SslPrincipalMapper.from_rules(rule)


def test_a_lone_unmatched_optional_group_is_empty():
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=([a-z]+)(,OU=[a-z]+)?$/$1$2/")
    assert mapper.get_name("CN=alice") == "alice"
    assert mapper.get_name("CN=alice,OU=eng") == "alice,OU=eng"
