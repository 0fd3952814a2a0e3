#!/usr/bin/env python3
"""Unpacks the GPU bundle where a device run carried it packed:

    python3 tools/gpu_unpack.py PACK DIR

PACK is a tar.xz of one folder (tools/gpu_bundle.sh packs .gpu/ into .gpu-pack/gpu.tar.xz,
since a device run carries at most 64 MiB with the working tree and .gpu/ unpacked nears that
by itself). The folder is replaced under DIR, modes and links as packed, and a stamp
DIR/FOLDER/.unpacked written; while the stamp is newer than PACK nothing is done, so the second
command on a warm machine does not unpack again. Python's tarfile and lzma only: the GPU machine
may have no xz. Prints one line; exits 1 with one line on a pack it cannot read."""

import os
import shutil
import sys
import tarfile


def main():
    pack, parent = sys.argv[1], sys.argv[2]
    try:
        with tarfile.open(pack, "r:xz") as t:
            tops = {m.name.split("/")[0] for m in t.getmembers()}
            if len(tops) != 1 or next(iter(tops)) in ("", ".", ".."):
                print(f"gpu_unpack: {pack} holds {sorted(tops)}, not one folder")
                return 1
            folder = os.path.join(parent, tops.pop())
            stamp = os.path.join(folder, ".unpacked")
            if os.path.exists(stamp) and os.path.getmtime(stamp) >= os.path.getmtime(pack):
                print(f"gpu_unpack: {folder} is already {pack} unpacked")
                return 0
            shutil.rmtree(folder, ignore_errors=True)
            # The "tar" filter keeps modes and links inside the folder and refuses paths that
            # leave it (Python 3.12 warns without a filter; older ones have none).
            if hasattr(tarfile, "tar_filter"):
                t.extractall(parent, filter="tar")
            else:
                t.extractall(parent)
    except (OSError, tarfile.TarError, EOFError) as e:
        print(f"gpu_unpack: cannot unpack {pack}: {e}")
        return 1
    open(stamp, "w").close()
    print(f"gpu_unpack: {pack} unpacked into {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
