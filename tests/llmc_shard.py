"""llm.c token shards as the Python tests read them (tetra's token caches are such shards)."""
import struct


def bin_tokens(path):
    """An llm.c shard's tokens: 256 int32 header words (magic, version, count), then uint16s."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    assert (magic, version) == (20240520, 1), path
    return list(struct.unpack(f"<{count}H", data[1024:1024 + 2 * count]))
