"""`minikafka serve`'s development default: no initial rebalance delay, unless a properties file or an override
sets one."""
from __future__ import annotations

from pathlib import Path

from minikafka.cli import _serve_config, build_parser

DELAY = "group.initial.rebalance.delay.ms"


def _config(*argv: str):
    return _serve_config(build_parser().parse_args(["serve", *argv]))


def test_serve_starts_groups_without_the_initial_rebalance_delay() -> None:
    assert _config().get(DELAY) == 0


def test_an_override_sets_the_delay_back() -> None:
    assert _config("--override", f"{DELAY}=3000").get(DELAY) == 3000


def test_a_properties_file_sets_the_delay_back(tmp_path: Path) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"{DELAY}=3000\n")
    assert _config("--config", str(properties)).get(DELAY) == 3000
