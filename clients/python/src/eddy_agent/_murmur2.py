"""Kafka's murmur2 (the Java client's default partitioner), for checking where a run lands.

The Emitter never calls this on the hot path: librdkafka's `partitioner=murmur2_random` does the
same in C. It is here so a user (and the tests) can say which partition a run id goes to, e.g.
to compare with `eddy replay --partitions N`.
"""

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """The signed 32-bit hash `org.apache.kafka.common.utils.Utils.murmur2` returns."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    full = length & ~3
    for i in range(0, full, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[full + 2] << 16
    if rest >= 2:
        h ^= data[full + 1] << 8
    if rest >= 1:
        h ^= data[full]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(key, partitions: int) -> int:
    """Partition of a keyed record under Kafka's default partitioner (toPositive(murmur2) % n)."""
    if isinstance(key, str):
        key = key.encode("utf-8")
    if partitions <= 1:
        return 0
    return (murmur2(key) & 0x7FFFFFFF) % partitions
