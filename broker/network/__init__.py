"""The socket server, inter-broker connections and the channel to the controller (Kafka's kafka.network and clients)."""
