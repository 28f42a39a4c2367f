"""The partition logs of a broker's log dirs (Kafka's LogManager) and what happens when a log dir fails."""
