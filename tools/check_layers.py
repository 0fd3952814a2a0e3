#!/usr/bin/env python3
"""Checks that tetra's source folders include only downwards and that no files include
each other in a cycle.

The layers, bottom to top: util < backend < model < parallel < transformer < optim < data <
checkpoint < plan < train < plot < jobs < cli.
A file may include files of its own layer and of the layers below; tests sit above all
of them and are not checked. Includes are the quoted ones (#include "backend/tensor.hpp"),
resolved against the repository root first, then against the including file's folder.

Usage: check_layers.py REPO_ROOT. Prints every problem as "file: problem" and exits 1 if
there is any, else prints a one-line summary and exits 0.
"""

import os
import re
import sys

LAYERS = ["util", "backend", "model", "parallel", "transformer", "optim", "data", "checkpoint", "plan",
          "train", "plot", "jobs", "cli"]
SUFFIXES = (".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')

def layer_of(rel):
    """Index of the layer a repository-relative path belongs to, or None."""
    top = rel.split("/", 1)[0]
    return LAYERS.index(top) if top in LAYERS else None


def sources(root):
    """Repository-relative paths of every source file under the layer folders, sorted."""
    out = []
    for layer in LAYERS:
        for folder, _, files in os.walk(os.path.join(root, layer)):
            for name in files:
                if name.endswith(SUFFIXES):
                    path = os.path.join(folder, name)
                    out.append(os.path.relpath(path, root).replace(os.sep, "/"))
    return sorted(out)


def includes(root, rel):
    """(line number, include text, resolved relative path or None) for each quoted include."""
    out = []
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            text = m.group(1)
            candidates = [text, os.path.join(os.path.dirname(rel), text)]
            resolved = None
            for c in candidates:
                c = os.path.normpath(c).replace(os.sep, "/")
                if os.path.isfile(os.path.join(root, c)):
                    resolved = c
                    break
            out.append((number, text, resolved))
    return out


def find_cycle(graph):
    """One include cycle as a list of files (first == last), or None. Iterative DFS."""
    state = {}  # file -> 1 while on the DFS path, 2 when finished
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_layers.py REPO_ROOT")
    root = sys.argv[1]
    problems = []
    graph = {}
    files = sources(root)
    for rel in files:
        own = layer_of(rel)
        graph[rel] = set()
        for number, text, target in includes(root, rel):
            where = f"{rel}:{number}"
            if target is None:
                problems.append(f'{where}: includes "{text}", which is not in the repository')
                continue
            graph[rel].add(target)
            layer = layer_of(target)
            if layer is None:
                problems.append(f'{where}: includes "{text}", outside the layer folders')
            elif layer > own:
                problems.append(f'{where}: includes "{text}": {LAYERS[layer]}/ is above '
                                f"{LAYERS[own]}/")
    cycle = find_cycle(graph)
    if cycle:
        problems.append(f"{cycle[0]}: include cycle: {' -> '.join(cycle)}")
    for p in problems:
        print(p)
    if problems:
        print(f"layering: {len(problems)} problem(s); layers bottom to top: "
              f"{' < '.join(LAYERS)}")
        return 1
    print(f"layering: {len(files)} files, every include downwards, no include cycles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
