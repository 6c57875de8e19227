#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Renders an npu-timeline trace (docs/cost.md) to a PNG, in lanes.

  tests/tools/npu-timeline-plot.py trace.json timeline.png \\
      [--from MS] [--to MS] [--title TEXT]

One lane per thread, and on the compute device's worker one lane per queue
(the encoder's and the language model's tasks run on the same thread, one
at a time, but they are different stages).  Slices: buffers arriving at or
leaving an element of the plugin (on the thread that carried them), the
tasks (with the stages the elements report inside them, drawn thinner),
and the arrows that tie a frame's PTS to the answer about it.  The lanes
come in pipeline order: sources, encoders, language model, the rest.

A developer tool (Debian's python3-matplotlib); the tests do not use it.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLOURS = {
    "in": "#7f7f7f", "out": "#2ca02c", "encode": "#1f77b4",
    "preprocess": "#aec7e8", "vision encoder": "#17becf",
    "log-mel": "#ffbb78", "audio encoder": "#ff7f0e",
    "prefill": "#d62728", "token": "#9467bd",
}


def slices_of(events):
    """(lane key, name, start ms, end ms, depth, colour) and the points of
    the flows' ends."""
    names, out, stacks, lane_of_tid = {}, [], {}, {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "thread_name":
            names[e["tid"]] = e["args"]["name"]
    for e in sorted((e for e in events if e["ph"] in "BEX"),
                    key=lambda e: e["ts"]):
        tid, ts = e["tid"], e["ts"] / 1000.0
        if e["ph"] == "X":
            key = (tid, e["args"].get("queue", ""))
            lane_of_tid[tid] = key
            out.append((key, e["name"], ts, ts + e["dur"] / 1000.0, 0,
                        COLOURS.get(e["name"], "#8c564b")))
        elif e["ph"] == "B":
            stacks.setdefault(tid, []).append(e)
        elif stacks.get(tid):
            b = stacks[tid].pop()
            if b.get("cat") == "stage":
                key, depth = lane_of_tid.get(tid, (tid, "")), 1
            else:
                key, depth = (tid, ""), len(stacks[tid])
            out.append((key, b["name"], b["ts"] / 1000.0, ts, depth,
                        COLOURS.get(b["name"],
                                    COLOURS.get(b.get("cat"), "#8c564b"))))
    return names, out


def lane_order(key, names, slices):
    """Sources first, then encoders, then the language model, then out."""
    tid, queue = key
    first = min((s for s in slices if s[0] == key), key=lambda s: s[2])[1]
    label = queue or names.get(tid, str(tid))
    if "llm" in label or first in ("prefill", "token"):
        rank = 2
    elif queue:
        rank = 1
    elif "<-" in first and "llm" not in first:
        rank = 0
    else:
        rank = 3
    return (rank, label)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("png")
    ap.add_argument("--from", dest="t0", type=float, default=None)
    ap.add_argument("--to", dest="t1", type=float, default=None)
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    with open(a.trace, encoding="utf-8") as f:
        events = json.load(f)["traceEvents"]
    names, slices = slices_of(events)
    if not slices:
        sys.exit("npu-timeline-plot: no slices in " + a.trace)
    t0 = a.t0 if a.t0 is not None else min(s[2] for s in slices)
    t1 = a.t1 if a.t1 is not None else max(s[3] for s in slices)
    slices = [s for s in slices if s[3] >= t0 and s[2] <= t1]
    keys = sorted({s[0] for s in slices},
                  key=lambda k: lane_order(k, names, slices))
    row = {k: i for i, k in enumerate(keys)}

    fig, ax = plt.subplots(figsize=(12, 0.6 * len(keys) + 1.2))
    for key, name, s, e, depth, colour in slices:
        h = 0.7 if depth == 0 else 0.35
        y = row[key] - h / 2 + (0.05 if depth else 0)
        ax.broken_barh([(s, max(e - s, (t1 - t0) / 2000))], (y, h),
                       facecolors=colour, edgecolor="black", linewidth=0.2)
    # the arrows: from the lane of the slice a flow leaves to the one it
    # enters, at the slices' starts
    lane_at = {}
    for key, name, s, e, depth, colour in slices:
        lane_at.setdefault((key[0], round(s, 3)), []).append(row[key])
    flows = {}
    for ev in events:
        if ev["ph"] in "sf":
            flows.setdefault(ev["id"], {})[ev["ph"]] = ev
    for fl in flows.values():
        if "s" not in fl or "f" not in fl:
            continue
        p = [(fl[k]["ts"] / 1000.0, lane_at.get((fl[k]["tid"],
              round(fl[k]["ts"] / 1000.0, 3)))) for k in "sf"]
        if p[0][1] and p[1][1] and t0 <= p[0][0] <= t1:
            ax.annotate("", xy=(p[1][0], p[1][1][0]),
                        xytext=(p[0][0], p[0][1][0]),
                        arrowprops=dict(arrowstyle="->", lw=0.4,
                                        color="#444444", alpha=0.6))
    labels = [k[1] + " (" + names.get(k[0], str(k[0])) + ")" if k[1]
              else names.get(k[0], str(k[0])) for k in keys]
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlim(t0, t1)
    ax.set_xlabel("ms since the tracer started")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), ncol=5, fontsize=7, loc="upper center",
              bbox_to_anchor=(0.5, -0.18 if len(keys) > 3 else -0.35))
    ax.set_title(a.title or a.trace)
    fig.tight_layout()
    fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
