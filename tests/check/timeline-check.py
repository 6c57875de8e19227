#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Checks an npu-timeline trace (test-timeline.c runs it).

  timeline-check.py TRACE --element NAME --pts P1,P2,... [--answer]
                    [--flow-error] [--watts DOMAIN=W] [--frame-bytes N]

TRACE must be strict JSON in the trace-event format: an object whose
"traceEvents" is a list of events with known phases, numbers where numbers
go, B/E balanced on each thread, every "s" flow with its "f".  Each PTS
given (what a pad probe saw go into NAME's sink pad) must arrive there, in
that order, with its PTS.  Every task slice must have a device and a
non-negative duration, and have been submitted before it started.  With
--answer, an arrow chain must lead from a frame's arrival to the
"token" tasks of npullm's answer with that PTS, and every token task with a
PTS is reached from its frame.  With --flow-error, a sink pad slice of NAME
must end with the flow "error".  With --watts "DOMAIN=W", the trace must
name that energy domain and every task that ran must carry its joules,
W times its duration (to 10 % and 2 ms: the meter is read a little after
the task's events).  With --frame-bytes N, every "encode" task that ran
must carry its bytes (the encoders report them), N bytes of the frame read
among them, and a total that is the sum of its kinds.
"""
import argparse
import json
import sys


def fail(msg):
    print("timeline-check: " + msg)
    sys.exit(1)


def no_constant(name):
    fail("not strict JSON: " + name)


def load(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        doc = json.loads(text, parse_constant=no_constant)
    except json.JSONDecodeError as e:
        fail("%s is not valid JSON: %s" % (path, e))
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"),
                                                   list):
        fail("no traceEvents list")
    return doc["traceEvents"]


def number(ev, key):
    v = ev.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        fail("%s is not a number in %r" % (key, ev))
    return v


def check_shape(events):
    """Phases, numbers, B/E nesting per thread; returns the closed slices
    (ph, name, tid, ts, end, args) of B/E pairs and X events."""
    slices, stacks = [], {}
    for ev in events:
        ph = ev.get("ph")
        if ph not in ("B", "E", "X", "i", "M", "s", "f"):
            fail("unknown phase in %r" % ev)
        number(ev, "pid")
        tid = number(ev, "tid")
        ts = number(ev, "ts")
        if ts < 0:
            fail("negative ts in %r" % ev)
        if ph == "B":
            stacks.setdefault(tid, []).append(ev)
        elif ph == "E":
            if not stacks.get(tid):
                fail("E without B on thread %d at %r" % (tid, ts))
            b = stacks[tid].pop()
            if ts < b["ts"]:
                fail("slice %r ends before it begins" % b)
            args = dict(b.get("args", {}))
            args.update(ev.get("args", {}))
            slices.append(("B", b["name"], tid, b["ts"], ts, args))
        elif ph == "X":
            dur = number(ev, "dur")
            if dur < 0:
                fail("negative duration in %r" % ev)
            slices.append(("X", ev["name"], tid, ts, ts + dur,
                           ev.get("args", {})))
    for tid, st in stacks.items():
        if st:
            fail("unclosed slices on thread %d: %r" % (tid, st))
    return slices


def check_tasks(events):
    tasks = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"]
    if not tasks:
        fail("no task slices")
    for t in tasks:
        args = t.get("args", {})
        if not args.get("device"):
            fail("task without a device: %r" % t)
        if "submitted" in args and args["submitted"] > t["ts"]:
            fail("task started before it was submitted: %r" % t)
    return tasks


def check_arrivals(events, element, pts):
    name = element + ":sink <- buffer"
    seen = [e["args"].get("pts_ns") for e in events
            if e["ph"] == "B" and e["name"] == name]
    if seen[-len(pts):] != pts:
        fail("arrivals at %s: PTS %r, expected %r last" % (name, seen, pts))
    return [e for e in events if e["ph"] == "B" and e["name"] == name]


def flow_graph(events):
    starts, ends = {}, {}
    for e in events:
        if e["ph"] == "s":
            starts[e["id"]] = e
        elif e["ph"] == "f":
            ends[e["id"]] = e
    if set(starts) != set(ends):
        fail("flows without both ends: %r" %
             sorted(set(starts) ^ set(ends)))
    graph = {}
    for i, s in starts.items():
        f = ends[i]
        if f["ts"] < s["ts"]:
            fail("flow %d goes back in time" % i)
        graph.setdefault((s["tid"], s["ts"]), []).append((f["tid"], f["ts"]))
    return graph


def reached(graph, start):
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def check_answer(events, arrivals, tasks):
    graph = flow_graph(events)
    tokens = [t for t in tasks if t["name"] == "token" and
              "pts_ns" in t.get("args", {})]
    if not tokens:
        fail("no token task carries a PTS")
    for t in tokens:
        frames = [a for a in arrivals
                  if a["args"].get("pts_ns") == t["args"]["pts_ns"]]
        if not frames:
            fail("token task %r speaks of no frame" % t)
        if (t["tid"], t["ts"]) not in reached(graph, (frames[0]["tid"],
                                                      frames[0]["ts"])):
            fail("no arrows from the frame at %r to token task %r" %
                 (frames[0]["args"]["pts"], t))


def check_joules(path, events, spec):
    domain, watts = spec.rsplit("=", 1)
    watts = float(watts)
    with open(path, encoding="utf-8") as f:
        names = json.load(f).get("otherData", {}).get("energy_domains")
    if names != [domain]:
        fail("energy domains %r, expected [%r]" % (names, domain))
    ran = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"]
    for t in ran:
        j = t["args"].get("joules", {}).get(domain)
        if j is None:
            fail("no joules of %s in %r" % (domain, t))
        seconds = j / watts
        dur = t["dur"] * 1e-6
        if abs(seconds - dur) > 0.1 * dur + 0.002:
            fail("%g J at %g W is %g s, the task took %g s: %r" %
                 (j, watts, seconds, dur, t))


def check_frame_bytes(events, n):
    ran = [e for e in events if e["ph"] == "X" and e.get("cat") == "task"
           and e.get("name") == "encode"]
    if not ran:
        fail("no encode task ran")
    for t in ran:
        b = t["args"].get("bytes")
        if b is None:
            fail("encode task without bytes: %r" % t)
        if b.get("frame", {}).get("read") != n:
            fail("encode task read %r frame bytes, expected %d: %r" %
                 (b.get("frame"), n, t))
        kinds = sum(v["read"] + v["written"] for k, v in b.items()
                    if k != "total")
        if kinds != b["total"]:
            fail("bytes total %d, its kinds sum to %d: %r" %
                 (b["total"], kinds, t))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--element", required=True)
    ap.add_argument("--pts", required=True)
    ap.add_argument("--answer", action="store_true")
    ap.add_argument("--flow-error", action="store_true")
    ap.add_argument("--watts")
    ap.add_argument("--frame-bytes", type=int)
    a = ap.parse_args()
    events = load(a.trace)
    if a.frame_bytes is not None:
        check_frame_bytes(events, a.frame_bytes)
    if a.watts:
        check_joules(a.trace, events, a.watts)
    slices = check_shape(events)
    arrivals = check_arrivals(events, a.element,
                              [int(p) for p in a.pts.split(",")])
    if a.answer:
        check_answer(events, arrivals, check_tasks(events))
    if a.flow_error:
        name = a.element + ":sink <- buffer"
        if not any(s[1] == name and s[5].get("flow") == "error"
                   for s in slices):
            fail("no slice of %s ended with the flow error" % name)


if __name__ == "__main__":
    main()
