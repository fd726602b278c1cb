"""Kafka's own murmur2 vectors (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
testMurmur2), so the partition a run lands on is the one Kafka's Java clients pick."""
import pytest

from eddy_agent import murmur2, partition_for

KAFKA_UTILS_TEST = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]


@pytest.mark.parametrize("data,want", KAFKA_UTILS_TEST)
def test_murmur2_matches_kafka_utils_test(data, want):
    assert murmur2(data) == want


@pytest.mark.parametrize("data,want", KAFKA_UTILS_TEST)
def test_partition_is_java_to_positive_modulo(data, want):
    # Utils.toPositive(murmur2(key)) % numPartitions, computed here from Kafka's hash values.
    for n in (1, 3, 12, 100):
        assert partition_for(data, n) == ((want & 0x7FFFFFFF) % n if n > 1 else 0)


def test_str_keys_hash_as_utf8():
    assert partition_for("foobar", 12) == partition_for(b"foobar", 12)
    assert partition_for("ünïcode", 7) == partition_for("ünïcode".encode("utf-8"), 7)
