"""llm.c token shards as the Python tests read them (tetra's token caches are such shards)."""
import struct

# llm.c's two formats (dev/data/data_common.py): (magic, version) -> struct code of a token.
FORMATS = {(20240520, 1): "H", (20240801, 7): "I"}


def bin_tokens(path):
    """An llm.c shard's tokens: 256 int32 header words (magic, version, count), then the count's
    tokens, uint16 (GPT-2's format) or uint32 (Llama 3's)."""
    with open(path, "rb") as f:
        data = f.read()
    magic, version, count = struct.unpack("<3i", data[:12])
    code = FORMATS[(magic, version)]
    size = struct.calcsize(code)
    return list(struct.unpack(f"<{count}{code}", data[1024:1024 + size * count]))
