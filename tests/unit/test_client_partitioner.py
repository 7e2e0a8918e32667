"""The producer's partitioner must pick the same partition as Java / kafka-python for a key."""

import random

from kafka.partitioner.default import murmur2 as kp_murmur2

from shoal.client.partitioner import DefaultPartitioner, murmur2, partition_for_key


def test_murmur2_matches_kafka_python_for_random_keys() -> None:
    rng = random.Random(7)
    for i in range(3000):
        key = bytes(rng.getrandbits(8) for _ in range(i % 64))
        assert murmur2(key) & 0xFFFFFFFF == kp_murmur2(bytearray(key)) & 0xFFFFFFFF, key
        assert -(2**31) <= murmur2(key) < 2**31


def test_known_java_vectors() -> None:
    # Values from Kafka's UtilsTest.testMurmur2 (Java ints).
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"a-little-bit-long-string") == -985981536
    assert murmur2(b"a-little-bit-longer-string") == -1486304829
    assert murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8") == -58897971
    assert murmur2(b"abc") == 479470107


def test_keyed_partition_is_positive_modulo() -> None:
    rng = random.Random(3)
    for _ in range(500):
        key = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 30)))
        n = rng.randint(1, 100)
        assert partition_for_key(key, n) == (kp_murmur2(bytearray(key)) & 0x7FFFFFFF) % n


def test_sticky_partition_for_null_keys_moves_on_new_batch() -> None:
    p = DefaultPartitioner(random.Random(1))
    first = p.partition("t", None, 6)
    assert all(p.partition("t", None, 6) == first for _ in range(50))
    p.on_new_batch("t", 6, first)
    second = p.partition("t", None, 6)
    assert second != first
    p.on_new_batch("t", 6, first)  # a stale notification does not move it again
    assert p.partition("t", None, 6) == second
