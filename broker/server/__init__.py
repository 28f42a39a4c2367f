"""The broker role (Kafka's BrokerServer and KafkaApis): the wiring of a broker's parts, request dispatch, one handler
module per API family."""
