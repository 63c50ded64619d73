"""Frontier service: owns the Mercator queues and politeness timers of the hosts on its partitions."""
