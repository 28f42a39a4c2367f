"""The API versions a broker serves and advertises (Kafka's ApiVersionManager), from its handler modules: what
KafkaApis dispatches, the network layer decodes and ApiVersions tells clients, kept in one place."""
from __future__ import annotations

from types import ModuleType

from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.codec import SCHEMAS


class ApiVersionManager:
    def __init__(self, handler_modules: list[ModuleType]) -> None:
        # The versions requests are decoded in (the schema's), whatever ApiVersions advertises.
        self.accepted_versions: dict[int, tuple[int, int]] = {}
        # What ApiVersions advertises; a module's VERSIONS may widen it where Kafka advertises more than it serves.
        self.versions: dict[int, tuple[int, int]] = {}
        for module in handler_modules:
            for api_key in module.HANDLERS:
                schema = SCHEMAS[api_key]
                self.accepted_versions[api_key] = (schema.min_version, schema.max_version)
                self.versions[api_key] = getattr(module, "VERSIONS", {}).get(api_key, self.accepted_versions[api_key])

    def api_version_list(self, version: int) -> list:
        """The advertised ranges as the ApiVersions response of `version` lists them."""
        cls = SCHEMAS[ApiKey.API_VERSIONS].response[version]
        return [cls.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                for k, (lo, hi) in sorted(self.versions.items())]
