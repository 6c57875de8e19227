#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""What does the trained audio model answer, over a grid of sounds?
(docs/trained-models.md, "The audio stage")

Loads the committed text model and audio encoder (tests/models/ or
--models), renders sounds through npuaudiotok's own front end and log-mel
(npu-render-audio) and prints the PyTorch model's answers:

  --waves sine square saw
                        audiotestsrc's waves over a frequency grid
                        (--freqs, or --random-freqs) at every rate and
                        format of training and of the held-out list: how
                        many of each are named right, by rate and
                        frequency ("--": a sine too near a boundary of the
                        ladder to have one right answer);
  --noise N             N fresh draws of each noise of the held-out list,
                        played by audiotestsrc itself (its generator is
                        unseeded: what a test run hears): how many are
                        named right;
  --speech N            N fresh renders of each word by the held-out
                        voices, speeds, pitches and noise levels (a seed of
                        their own): how many of each word are named right;
  --heldout             the held-out list itself, with the first mel bins
                        of the misses' spectrum beside the nearest right
                        answers' (the log-mel's mean over time).

A developer's probe, like probe-position.py: nothing in the suite runs it.

    tests/train/probe-sounds.py --build build --waves square saw --noise 50
"""

import argparse
import math
import os
import random
import re
import sys
import tempfile

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

import sounds  # noqa: E402
import train  # noqa: E402


def load(models, tools):
    tokens = train.build_vocab()[0]
    llm, aud = train.Llama(len(tokens)), train.Audio()
    text = os.path.join(models, "videotestsrc-text.gguf")
    train.load_params(text, train.text_tensors(llm, as_stored=False))
    train.load_params(os.path.join(models, "audiotestsrc-mmproj.gguf"),
                      train.audio_tensors(aud, as_stored=False))
    llm.eval()
    aud.eval()
    return tokens, llm, aud, train.prompt_tokens(tools, text)


def answers(model, x):
    tokens, llm, aud, prompt_ids = model
    out = train.greedy(aud, llm, torch.from_numpy(x), prompt_ids,
                       train.AUDIO_PROMPTS[0], tokens.index("<|im_end|>"),
                       [-1] * train.A_TOKENS)
    return [train.decode(tokens, o).strip() for o in out]


def render(tools, lines):
    """Renders audiotestsrc as it plays (no seeded noise substitution)."""
    with tempfile.TemporaryDirectory() as d:
        a = sounds.run_in_parts(
            [os.path.join(tools, "npu-render-audio"), "--mels",
             str(sounds.MELS), "--frames", str(sounds.FRAMES)], lines, d,
            sounds.MELS * sounds.FRAMES)
    return a.reshape(len(lines), sounds.MELS, sounds.FRAMES)


def waves(tools, model, kinds, freqs, rng):
    caps = sounds.TRAIN_CAPS + [c for c in sounds.HELDOUT_CAPS
                                if c not in sounds.TRAIN_CAPS]
    for kind in kinds:
        lines, keys = [], []
        for c in caps:
            for f in freqs:
                props = "wave=%s volume=%.3f freq=%.1f" % (
                    kind, rng.uniform(0.05, 0.9), f)
                lines.append(sounds.testsrc(rng, props, c, 0.9))
                keys.append((c, f))
        got = answers(model, render(tools, lines))
        def want(f):
            if kind == "sine":
                return ["sine", "%d" % sounds.sine_label(f), "hertz"]
            return sounds.FIXED[kind][1]

        def counted(f):
            # a sine near a boundary of the ladder has two right answers;
            # the held-out list keeps 12 % (as a ratio) clear of them
            return kind != "sine" or sounds.sine_margin(f) > 0.12
        print("%s waves: answers by caps (rows) and frequency (columns)"
              % kind)
        print("%-28s %s" % ("", " ".join("%6.0f" % f for f in freqs)))
        for c in caps:
            row = []
            for (kc, f), a in zip(keys, got):
                if kc != c:
                    continue
                ok = train.answer_ok(a, want(f))
                if not counted(f):
                    row.append("    --")
                    continue
                # the first word that tells the answers apart
                word = re.sub(r"^(A|The word) |sine tone of about ", "",
                              a)[:6]
                row.append("    ok" if ok else "%6s" % word)
            print("%-28s %s" % ("%s %d Hz %d ch" % (c[2], c[0], c[1]),
                                " ".join(row)))
        n = sum(counted(k[1]) for k in keys)
        right = sum(counted(k[1]) and train.answer_ok(a, want(k[1]))
                    for k, a in zip(keys, got))
        print("%s: %d of %d right" % (kind, right, n))


def noise(tools, model, n, heldout):
    for line, words in heldout:
        if "noise" not in line:
            continue
        got = answers(model, render(tools, [line] * n))
        wrong = [a for a in got if not train.answer_ok(a, words)]
        print("%d of %d right: %s%s" % (n - len(wrong), n, line,
                                        (" (misses: %s)" % ", ".join(
                                            sorted(set(wrong))))
                                        if wrong else ""))


def speech(tools, model, n):
    with tempfile.TemporaryDirectory() as d:
        specs = sounds.speech_specs(random.Random(99), n,
                                    sounds.HELDOUT_VOICES, (125, 215),
                                    (15, 85), [None, 18, 27, 36], d)
        got = answers(model, render(tools, [s[0] for s in specs]))
    total = 0
    for w in sounds.WORDS:
        res = [(a, s) for a, s in zip(got, specs) if s[2][1] == w]
        wrong = [a for a, s in res if not train.answer_ok(a, s[2])]
        total += len(res) - len(wrong)
        print("%-8s %d of %d%s" % (w, len(res) - len(wrong), len(res),
                                   (" (misses: %s)" % ", ".join(wrong))
                                   if wrong else ""))
    print("speech: %d of %d right" % (total, len(specs)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default="tests/models")
    ap.add_argument("--waves", nargs="*", default=[],
                    choices=("sine", "square", "saw"))
    ap.add_argument("--random-freqs", type=int, default=0, metavar="N",
                    help="N frequencies drawn log-uniform from 100 Hz to "
                    "2 kHz (as the held-out list draws them) instead")
    ap.add_argument("--freqs", type=float, nargs="*",
                    default=[100, 200, 400, 700, 1000, 1200, 1400, 1600,
                             1800, 2000])
    ap.add_argument("--noise", type=int, default=0)
    ap.add_argument("--speech", type=int, default=0)
    ap.add_argument("--heldout", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    sounds.JOBS = args.threads
    tools = os.path.join(args.build, "tests", "tools")
    model = load(args.models, tools)
    heldout = []
    with open(os.path.join(args.models, "audio-heldout.txt")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            src, words = (p.strip() for p in line.split("|"))
            src = src.replace("location=", "location=%s/" % args.models)
            heldout.append((src, words.split(",")))
    if args.waves:
        freqs = args.freqs
        if args.random_freqs:
            r = random.Random(11)
            freqs = sorted(round(math.exp(r.uniform(math.log(100),
                                                    math.log(2000))), 1)
                           for _ in range(args.random_freqs))
        waves(tools, model, args.waves, freqs, random.Random(7))
    if args.noise:
        noise(tools, model, args.noise, heldout)
    if args.speech:
        speech(tools, model, args.speech)
    if args.heldout:
        x = render(tools, [h[0] for h in heldout])
        got = answers(model, x)
        right = 0
        for (src, words), a in zip(heldout, got):
            if train.answer_ok(a, words):
                right += 1
            else:
                print("miss: %s: %r" % (src, a))
        print("held-out: %d of %d right" % (right, len(heldout)))


if __name__ == "__main__":
    sys.exit(main())
