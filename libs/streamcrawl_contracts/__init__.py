"""streamcrawl_contracts: pydantic message models and the topic registry, the single source of truth for
every message on Kafka (exported as JSON Schema to schemas/json)."""
