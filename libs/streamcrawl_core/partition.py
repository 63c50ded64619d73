"""Kafka-compatible key partitioning for host-keyed topics.

``murmur2`` is a bit-exact port of Kafka's Java ``org.apache.kafka.common.utils.Utils.murmur2``
(seed ``0x9747b28c``), which librdkafka's ``murmur2`` / ``murmur2_random`` partitioners reproduce.
``partition_for`` is the Java ``BuiltInPartitioner`` formula ``toPositive(murmur2(key)) % n``.

Every producer of a host-keyed topic MUST be configured with ``partitioner=murmur2_random``
(librdkafka's default is ``consistent_random`` = CRC32, which puts the same key on a different
partition than Java clients and than this module). With that setting a record keyed by
``host_key(host)`` lands on ``partition_for(host_key(host), n)``, so a service can compute which
partition (and therefore which consumer) owns a host without asking the broker.
"""

from __future__ import annotations

__all__ = ["HOST_BUCKETS", "host_bucket", "host_key", "key_mismatch", "murmur2", "partition_for"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Return Kafka's murmur2 hash of ``data`` as a *signed* 32-bit int (Java ``int`` semantics).

    Raises ``TypeError`` if ``data`` is not bytes-like.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise TypeError(f"murmur2() needs bytes, not {type(data).__name__}")
    buf = bytes(data)
    length = len(buf)
    # Java does all arithmetic in wrapping 32-bit ints; we mask after every multiply/add.
    h = (_SEED ^ length) & _MASK32
    n4 = length - (length & 3)
    for i in range(0, n4, 4):
        k = int.from_bytes(buf[i : i + 4], "little")
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = (h * _M) & _MASK32
        h ^= k
    tail = length & 3
    # Java's switch falls through 3 -> 2 -> 1; bytes are sign-irrelevant after the & 0xff.
    if tail == 3:
        h ^= buf[n4 + 2] << 16
    if tail >= 2:
        h ^= buf[n4 + 1] << 8
    if tail >= 1:
        h ^= buf[n4]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key: str, n: int) -> int:
    """Partition (0..n-1) Kafka assigns to a record with UTF-8 key ``key`` among ``n`` partitions.

    Raises ``ValueError`` if ``n < 1`` and ``TypeError`` if ``key`` is not a str.
    """
    if not isinstance(key, str):
        raise TypeError(f"partition_for() key must be str, not {type(key).__name__}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"partition count must be a positive int, got {n!r}")
    # Java's Utils.toPositive: clear the sign bit (NOT abs(), which differs for negatives).
    return (murmur2(key.encode("utf-8", "surrogatepass")) & 0x7FFFFFFF) % n


def host_key(host: str) -> str:
    """Kafka message key for every host-keyed topic: the host, lowercased, without port.

    ``host`` is expected to come from ``urls.host_of``; surrounding whitespace and a trailing dot are
    dropped so that a hand-typed host maps to the same partition. Raises ``ValueError`` if empty.
    """
    if not isinstance(host, str):
        raise TypeError(f"host_key() needs str, not {type(host).__name__}")
    key = host.strip().rstrip(".").lower()
    if not key:
        raise ValueError("empty host")
    return key


#: Buckets each partition's host index is spread over (the frontier's frontier_hosts table), so that no
#: single Cassandra partition holds every host of a Kafka partition: at 50M hosts and 64 partitions a bucket
#: holds ~12k host names (~0.5 MB).
HOST_BUCKETS = 64


def host_bucket(host: str, buckets: int = HOST_BUCKETS) -> int:
    """The bucket (0..buckets-1) of ``host`` within its partition's host index. Independent of the
    partition (murmur2 with the bytes reversed), so a partition's hosts spread over every bucket."""
    return (murmur2(host.encode("utf-8", "surrogatepass")[::-1]) & 0x7FFFFFFF) % buckets


def key_mismatch(key: str | None, partition: int, host: str, partitions: int | None) -> str | None:
    """Why a record of a host-keyed topic whose payload names ``host`` is not where that host's records
    belong, or None when it is: its key must be the host, and (when the topic's partition count is known)
    its partition the host's. A record elsewhere would be handled out of the host's order, by an
    instance that does not own the host's state (its politeness timer, its seen-set)."""
    if key is None:
        return f"no key (the payload's host is {host[:200]!r})"
    if key != host:
        return f"key {key[:200]!r} is not the payload's host {host[:200]!r}"
    if partitions:
        owner = partition_for(host, partitions)
        if owner != partition:
            return f"partition {partition}, but host {host[:200]!r} is on partition {owner} of {partitions}"
    return None
