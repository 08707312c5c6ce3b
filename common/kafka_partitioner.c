/*
 * Kafka's default partitioner for keyed records (see kafka.h): murmur2 as the Java
 * client computes it, so that the capture, the tests and any Java consumer agree on
 * the partition of a primary key. Plain arithmetic: no librdkafka here.
 */
#include "common/kafka.h"

uint32_t cdc_kafka_murmur2(const void *key, size_t len)
{
    /* Kafka's Utils.murmur2: 32-bit MurmurHash2, little-endian 4-byte blocks. */
    const uint32_t m = 0x5bd1e995u;
    const unsigned r = 24;
    const unsigned char *data = key;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t blocks = len / 4;

    for (size_t i = 0; i < blocks; i++) {
        const unsigned char *b = data + i * 4;
        uint32_t k =
            (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    switch (len & 3) {
    case 3:
        h ^= (uint32_t)data[(len & ~(size_t)3) + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)data[(len & ~(size_t)3) + 1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)data[len & ~(size_t)3];
        h *= m;
        break;
    default:
        break;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

int32_t cdc_kafka_partition_for_key(const void *key, size_t len, int32_t npartitions)
{
    if (npartitions <= 0)
        return -1;
    return (int32_t)((cdc_kafka_murmur2(key, len) & 0x7fffffffu) % (uint32_t)npartitions);
}
