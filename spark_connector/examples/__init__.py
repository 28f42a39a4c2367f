"""Runnable pipelines built on the minikafka Spark connector."""
