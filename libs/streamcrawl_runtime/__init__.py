"""streamcrawl_runtime: the shared Kafka run loop and the adapters to Kafka, Cassandra and S3."""
