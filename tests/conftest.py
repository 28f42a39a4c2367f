"""Shared test fixtures: real brokers (`minikafka.Broker`, as users run them), stopped by the test that started them."""
from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import minikafka
from minikafka.broker_handle import TEST_DEFAULTS
from minikafka.config import BROKER_PROPERTIES

# The suite checks the broker as Kafka's defaults configure it (e.g. 50 offsets partitions, a rebalance delay),
# so the handle's test-friendly defaults are set back to those.
KAFKA_DEFAULTS = {name: BROKER_PROPERTIES[name][1] for name in TEST_DEFAULTS}


@pytest.fixture
def broker_factory(tmp_path) -> Iterator[Callable[..., minikafka.Broker]]:
    """Starts brokers for one test: `broker_factory(num_partitions=3)` sets num.partitions (underscores for dots).

    Each broker keeps its data dir and log in the test's tmp dir, for a look after a failure.
    """
    started: list[minikafka.Broker] = []

    def make(**properties: object) -> minikafka.Broker:
        base = tmp_path / f"broker-{len(started) + 1}"
        broker = minikafka.Broker(data_dir=base / "data", log_path=base / "broker.log",
                                  config={**KAFKA_DEFAULTS, **{k.replace("_", "."): v for k, v in properties.items()}})
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        try:
            broker.kill()  # the data is thrown away: no need to wait for a clean stop
        finally:
            broker.close()


@pytest.fixture
def broker(broker_factory) -> minikafka.Broker:
    return broker_factory()


@pytest.fixture(scope="module", params=["compiled", "python"])
def record_walk(request) -> Iterator[str]:
    """Runs a module's tests with each of the record walks (the log validator's and the log cleaner's), in this
    process and in the brokers they start: the compiled ones (skipped where they are not built) and the Python
    fallbacks."""
    from minikafka.storage import log_cleaner, log_validator

    with pytest.MonkeyPatch.context() as patch:
        if request.param == "compiled":
            try:
                from minikafka.protocol._record_codec import put_records, retained, rewrite, walk
            except ImportError:
                pytest.skip("the compiled record walk (protocol/_record_codec.c) is not built")
            patch.setattr(log_validator, "_walk", walk)
            patch.setattr(log_cleaner, "_put_records", put_records)
            patch.setattr(log_cleaner, "_retained", retained)
            patch.setattr(log_cleaner, "_rewrite", rewrite)
            patch.delenv(log_validator.PURE_PYTHON_ENV, raising=False)
        else:
            patch.setattr(log_validator, "_walk", log_validator._python_walk)
            patch.setattr(log_cleaner, "_put_records", log_cleaner._python_put_records)
            patch.setattr(log_cleaner, "_retained", log_cleaner._python_retained)
            patch.setattr(log_cleaner, "_rewrite", log_cleaner._python_rewrite)
            patch.setenv(log_validator.PURE_PYTHON_ENV, "1")
        yield request.param


@pytest.fixture
def unique_topic(request) -> str:
    return "t-" + request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:150]
