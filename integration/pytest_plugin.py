"""pytest plugin: minikafka fixtures (filled in by the integration work)."""
