#!/usr/bin/env python3
"""The layering check (tools/check_layers.py) on small trees made here: a tree whose includes
all go downwards passes; an upward include, an include cycle and an include of a file that
does not exist each fail, naming the file and line.

Usage: test_check_layers.py CHECKER. Exits 0 when every case behaves, else 1."""

import os
import subprocess
import sys
import tempfile


def run(checker, files):
    """The checker's exit status and output on a temporary repository of `files`
    ({path: text}), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="layers_") as root:
        for path, text in files.items():
            full = os.path.join(root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)
        r = subprocess.run([sys.executable, checker, root], capture_output=True, text=True)
    return r.returncode, r.stdout


def main():
    checker = sys.argv[1]
    base = {
        "util/error.hpp": "#pragma once\n",
        "backend/tensor.hpp": '#include "util/error.hpp"\n',
        "train/trainer.cpp": '#include "backend/tensor.hpp"\n#include <vector>\n',
        "cli/main.cpp": '#include "train/trainer.cpp"\n#include "plot/svg.hpp"\n',
        "plot/svg.hpp": '#include "train/trainer.cpp"\n',
    }
    failures = []

    def expect(name, files, code, *needles):
        rc, out = run(checker, files)
        if rc != code or any(n not in out for n in needles):
            failures.append(f"{name}: exit {rc}, output:\n{out}")

    expect("downwards", base, 0, "every include downwards")
    expect("upward", {**base, "backend/tensor.hpp": '#include "util/error.hpp"\n#include "train/trainer.cpp"\n'},
           1, 'backend/tensor.hpp:2: includes "train/trainer.cpp": train/ is above backend/')
    expect("plan above train", {**base, "plan/setup.hpp": '#include "train/trainer.cpp"\n'},
           1, 'plan/setup.hpp:1: includes "train/trainer.cpp": train/ is above plan/')
    expect("cycle", {**base, "util/a.hpp": '#include "util/b.hpp"\n', "util/b.hpp": '#include "util/a.hpp"\n'},
           1, "include cycle: util/a.hpp -> util/b.hpp -> util/a.hpp")
    expect("missing", {**base, "data/x.cpp": '#include "data/nothere.hpp"\n'},
           1, 'data/x.cpp:1: includes "data/nothere.hpp", which is not in the repository')
    for f in failures:
        print(f)
    print(f"check_layers: {5 - len(failures)} of 5 cases as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
