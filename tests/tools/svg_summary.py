#!/usr/bin/env python3
"""Reads an SVG written by `tetra plot` as XML and prints what the tests check, as JSON:
the root tag, per lane (<g class="lane" data-rank=R>) its forward and backward boxes as
[micro-batch, chunk] pairs and its comm and wait shapes, the ranks marked as stragglers
(<g class="rank" data-straggler="1">), the steps of a loss curve, and a sweep's layouts
(<g class="layout">: name, status, fits, which parts of the step it draws, whether the plan's
estimate is marked). Exit status 1 when the file is not well-formed XML."""
import json
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        print(f"{path}: not XML: {e}", file=sys.stderr)
        return 1
    out = {"root": root.tag, "lanes": {}, "stragglers": [], "ranks": 0, "loss_steps": None,
           "layouts": []}
    for g in root.iter(NS + "g"):
        cls = g.get("class")
        if cls == "lane":
            lane = {"F": [], "B": [], "comm": 0, "wait": 0}
            for r in g.iter(NS + "rect"):
                c = r.get("class")
                if c in ("F", "B"):
                    lane[c].append([int(r.get("data-mb")), int(r.get("data-chunk"))])
                elif c in ("comm", "wait"):
                    lane[c] += 1
            out["lanes"][g.get("data-rank")] = lane
        elif cls == "rank":
            out["ranks"] += 1
            if g.get("data-straggler") == "1":
                out["stragglers"].append(int(g.get("data-rank")))
        elif cls == "loss":
            out["loss_steps"] = int(g.get("data-steps"))
        elif cls == "layout":
            parts = [r.get("class") for r in g.iter(NS + "rect")]
            out["layouts"].append({"name": g.get("data-name"), "status": g.get("data-status"),
                                   "fits": g.get("data-fits") == "1",
                                   "parts": [p for p in parts if p != "estimate"],
                                   "estimate": "estimate" in parts})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
