# SPDX-License-Identifier: LGPL-2.1-or-later
"""The sounds of tests/train/train.py: audiotestsrc and espeak-ng.

Each sound is a gst-launch description of a source that ends by itself
(audiotestsrc with num-buffers, or filesrc ! wavparse of a WAV that
espeak-ng spoke), with the caption the model must answer and the words the
answer must contain.  npu-render-audio turns them into the log-mel window
npuaudiotok gives its encoder (its own front end and log-mel), so training
sees what the element sees.  docs/trained-models.md lists the answers.
"""

import math
import os
import re
import struct
import subprocess
import wave
import zlib

import numpy as np

# One window of the encoder: 1 s, 100 mel frames of 80 bins, 25 tokens
# (qwen2a: two frames a position, two positions a token).  Every clip is
# at most MAX_SECONDS long, so it is one chunk of npuaudiotok.
MELS = 80
FRAMES = 100
MAX_SECONDS = 0.95

# "A sine tone of about N hertz.": N is the nearest of these (nearest on a
# log scale: the ratio to N is what counts)
SINE_LADDER = [100, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 4000]
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven",
         "eight", "nine", "red", "green", "blue", "yellow", "cyan",
         "magenta", "white", "black", "yes", "no", "stop", "go"]
# caption, words the answer must contain
FIXED = {
    "square": ("A square wave.", ["square wave"]),
    "saw": ("A sawtooth wave.", ["sawtooth wave"]),
    "white-noise": ("White noise.", ["white noise"]),
    "pink-noise": ("Pink noise.", ["pink noise"]),
    "ticks": ("Ticks.", ["ticks"]),
    "silence": ("Silence.", ["silence"]),
}
KINDS = ["sine"] + list(FIXED) + ["speech"]
# Training sounds of each kind, as a multiple of --audio-per-kind.  Square
# and saw waves differ only in their harmonics (odd ones at 1/n, or all at
# 1/n), which a 16 kHz log-mel shows as a few peaks above the fundamental
# once it passes 1 kHz; with 60 of each, the joint run named 30 of 80 square
# waves of a grid of rates and frequencies right and called the rest
# sawtooth waves, sines or pink noise (tests/train/probe-sounds.py,
# docs/trained-models.md): 8 x as many of each, over a frequency range a
# little wider than the held-out one, so its edges are inside it, and
# sines and ticks more too, so that they keep their share (with sines at
# 4 x beside these, a 1 kHz sine became "Ticks." at 4 of 8 rates).
TRAIN_MIX = {"sine": 8, "square": 8, "saw": 8, "white-noise": 2,
             "pink-noise": 2, "ticks": 2, "silence": 1}
WAVE_FREQS = (100, 2000)         # held-out square and saw waves
TRAIN_WAVE_FREQS = (80, 2500)
# A square wave whose period is a whole number of samples (1 kHz at 16 or
# 48 kHz: what users type) has clean odd harmonics; at any other frequency
# audiotestsrc's square, which is not band-limited, folds its upper
# harmonics back as a floor of aliases between them.  Trained on random
# frequencies alone, the model knew squares by that floor and called 1 kHz
# squares sines at 5 of 8 rates: this share of the training square and saw
# waves is at a multiple of ROUND_HZ.
ROUND_SHARE, ROUND_HZ = 0.25, 50
# What npu-render-audio does beyond playing the source, for the cache key:
# since it writes 0 into the frame audiotestsrc's ticks leave unwritten
# (tests/npuaudioticks.h), a cache of sounds rendered before is stale; the
# same since the noises are drawn from the seed (noise_source())
RENDERER = "ticks completed; seeded noise"

# what the test sources give: rate, channels, format
TRAIN_CAPS = [(16000, 1, "S16LE"), (16000, 1, "F32LE"), (22050, 1, "S16LE"),
              (44100, 2, "S16LE"), (48000, 2, "F32LE"), (24000, 1, "S32LE")]
HELDOUT_CAPS = [(16000, 1, "S16LE"), (44100, 2, "S16LE"), (32000, 2, "S32LE"),
                (48000, 1, "F32LE")]   # 32 kHz never trained

# espeak-ng voices (accent + variant); the held-out pairs are never
# trained, nor are their variants
ACCENTS = ["en", "en-us", "en-gb-scotland", "en-gb-x-rp", "en-029",
           "en-gb-x-gbclan", "en-us-nyc", "en-gb-x-gbcwmd"]
TRAIN_VARIANTS = ["m1", "m2", "m3", "m4", "m6", "f1", "f2", "f4"]
HELDOUT_VOICES = ["en-gb-x-rp+m7", "en-us+f3", "en-029+f5", "en+m5",
                  "en-gb-scotland+f3", "en-us-nyc+m7"]


def sine_label(freq):
    return min(SINE_LADDER, key=lambda n: abs(math.log(freq / n)))


def sine_margin(freq):
    """How far (log ratio) freq is from a boundary of the ladder."""
    d = sorted(abs(math.log(freq / n)) for n in SINE_LADDER)
    return d[1] - d[0]


def caps_string(c):
    return "audio/x-raw,format=%s,rate=%d,channels=%d" % (c[2], c[0], c[1])


def testsrc(rng, props, c, seconds):
    """audiotestsrc for about @seconds, in 4 buffers."""
    per = max(1, int(seconds * c[0] / 4))
    return ("audiotestsrc %s num-buffers=4 samplesperbuffer=%d ! %s" %
            (props, per, caps_string(c)))


def tone_spec(rng, kind, c, heldout):
    """(source, caption, words) of one audiotestsrc sound."""
    seconds = rng.uniform(0.4, MAX_SECONDS)
    vol = "volume=%.3f" % rng.uniform(0.05, 0.9)
    if kind == "sine":
        while True:
            f = math.exp(rng.uniform(math.log(100), math.log(4000)))
            # held-out: clear of the ladder's boundaries; training: all
            if not heldout or sine_margin(f) > 0.12:
                break
        n = sine_label(f)
        return (testsrc(rng, "wave=sine freq=%.1f %s" % (f, vol), c, seconds),
                "A sine tone of about %d hertz." % n,
                ["sine", "%d" % n, "hertz"])
    caption, words = FIXED[kind]
    props = "wave=%s %s" % (kind, vol)
    if kind in ("square", "saw"):
        lo, hi = WAVE_FREQS if heldout else TRAIN_WAVE_FREQS
        f = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        if not heldout and rng.random() < ROUND_SHARE:
            f = max(ROUND_HZ, round(f / ROUND_HZ) * ROUND_HZ)
        props += " freq=%.1f" % f
    elif kind == "ticks":
        props += (" freq=%.1f tick-interval=%d sine-periods-per-tick=%d" %
                  (rng.uniform(300, 3000), rng.randint(80, 300) * 1000000,
                   rng.randint(5, 40)))
    elif kind == "silence":
        props = "wave=silence"
    return testsrc(rng, props, c, seconds), caption, list(words)


def read_wav(path):
    with wave.open(path, "rb") as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        rate = w.getframerate()
        a = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    return rate, a.astype(np.float64) / 32768.0


def write_wav(path, rate, a):
    s = np.clip(np.round(a * 32767.0), -32768, 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(s.tobytes())


def speak(rng, word, voice, speed, pitch, snr_db, path):
    """espeak-ng's @word, its silence trimmed to a short random margin,
    a random level, white noise at @snr_db (None: none); written as a
    16-bit WAV at espeak-ng's rate.  False if it is too long."""
    tmp = path + ".raw.wav"
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p",
                    str(pitch), "-w", tmp, word], check=True)
    rate, a = read_wav(tmp)
    os.unlink(tmp)
    loud = np.nonzero(np.abs(a) > 0.02 * np.abs(a).max())[0]
    lead = int(rng.uniform(0.01, 0.1) * rate)
    tail = int(rng.uniform(0.01, 0.1) * rate)
    a = a[max(0, loud[0] - lead):loud[-1] + tail]
    if len(a) > MAX_SECONDS * rate:
        return False
    a *= rng.uniform(0.1, 0.9) / np.abs(a).max()
    if snr_db is not None:
        p = np.mean(a ** 2) / 10 ** (snr_db / 10)
        nrng = np.random.default_rng(rng.randrange(1 << 30))
        a = a + nrng.normal(0, math.sqrt(p), len(a))
    write_wav(path, rate, a)
    return True


def speech_specs(rng, n_per_word, voices, speeds, pitches, snrs, directory,
                 source_dir=None):
    """n_per_word renders of each word into directory: (source, caption,
    words); the source names the file under source_dir when given (the
    committed held-out files are found next to their list)."""
    os.makedirs(directory, exist_ok=True)
    out = []
    for word in WORDS:
        made = 0
        while made < n_per_word:
            name = "%s-%d.wav" % (word, made)
            path = os.path.join(directory, name)
            if not speak(rng, word, rng.choice(voices),
                         rng.randint(*speeds), rng.randint(*pitches),
                         rng.choice(snrs), path):
                continue
            loc = os.path.join(source_dir, name) if source_dir else path
            out.append(("filesrc location=%s ! wavparse" % loc,
                        "The word %s." % word, ["word", word]))
            made += 1
    return out


def build_specs(rng, per_kind, speech_per_word, heldout, directory,
                source_dir=None):
    """Sounds of every kind: (source, caption, words)."""
    caps = HELDOUT_CAPS if heldout else TRAIN_CAPS
    specs = []
    for kind in KINDS[:-1]:
        # the held-out list keeps the one mix it was drawn with
        n = per_kind * (4 if kind == "sine" else 1) if heldout else \
            per_kind * TRAIN_MIX[kind]
        for i in range(n):
            specs.append(tone_spec(rng, kind, caps[(i + len(specs)) %
                                                   len(caps)], heldout))
    if heldout:
        voices = HELDOUT_VOICES
        speeds, pitches, snrs = (125, 215), (15, 85), [None, 18, 27, 36]
    else:
        voices = ["%s+%s" % (a, v) for a in ACCENTS for v in TRAIN_VARIANTS]
        voices = [v for v in voices if v not in HELDOUT_VOICES]
        speeds, pitches, snrs = (120, 220), (10, 90), [None, 15, 20, 25, 30,
                                                       40]
    specs += speech_specs(rng, speech_per_word, voices, speeds, pitches,
                          snrs, directory, source_dir)
    return specs


# --- audiotestsrc's noises, drawn from a seed ---------------------------------
# audiotestsrc draws its white and pink noise from an unseeded GRand
# (g_rand_new ()), so the sounds it renders, and the weights trained on
# them, differed from run to run.  The training renderer draws the same
# noises itself from a seeded generator, by audiotestsrc's own algorithm
# (gst-plugins-base 1.22, gstaudiotestsrc.c), and plays them as WAV files;
# the held-out lists keep naming audiotestsrc, which the tests run.
NOISE_RE = re.compile(r"^audiotestsrc wave=(white-noise|pink-noise) "
                      r"volume=([0-9.]+) num-buffers=(\d+) "
                      r"samplesperbuffer=(\d+) ! audio/x-raw,format=(\w+),"
                      r"rate=(\d+),channels=(\d+)$")
PINK_ROWS = 12          # audiotestsrc's num_rows
PINK_RANDOM_BITS = 16   # and PINK_RANDOM_BITS


def white_noise(gen, n):
    """g_rand_double_range (gen, -1.0, 1.0) per sample."""
    return gen.uniform(-1.0, 1.0, n)


def pink_noise(gen, n):
    """audiotestsrc's pink noise (Phil Burk's Voss-McCartney generator):
    sample k (k = 1, 2, ... modulo 2^PINK_ROWS) renews row
    trailing_zeros(k) of PINK_ROWS random rows (none when k is 0), and
    the value is the rows' running sum plus one fresh white value, times
    1 / ((PINK_ROWS + 1) 2^(PINK_RANDOM_BITS - 1)).  Each random value
    is 32768 - 65536 u / 2^32 for a 32-bit u, truncated to an integer."""
    def draw(m):
        u = gen.integers(0, 1 << 32, m, dtype=np.uint64).astype(np.float64)
        return np.trunc(32768.0 - 65536.0 * u / 4294967296.0)
    index = np.arange(1, n + 1) & ((1 << PINK_ROWS) - 1)
    total = np.zeros(n)
    for row in range(PINK_ROWS):
        renew = (index != 0) & ((index & ((1 << (row + 1)) - 1)) ==
                                (1 << row))
        at = np.nonzero(renew)[0]
        # the row's value at each sample: its last renewal's (0 before)
        held = np.zeros(n)
        held[at] = draw(len(at))
        last = np.where(renew, np.arange(n), -1)
        last = np.maximum.accumulate(last)
        total += np.where(last >= 0, held[np.maximum(last, 0)], 0.0)
    total += draw(n)
    return total / ((PINK_ROWS + 1) * (1 << (PINK_RANDOM_BITS - 1)))


def write_wav_format(path, rate, channels, fmt, samples):
    """Interleaved samples (in [-1, 1]) as a WAV file of S16LE, S32LE
    (PCM) or F32LE (IEEE float), converted as audiotestsrc converts
    them: scaled by 32767 or 2147483647 and truncated, or kept as
    floats."""
    if fmt == "F32LE":
        data, tag, bits = samples.astype("<f4").tobytes(), 3, 32
    elif fmt == "S16LE":
        data = np.trunc(samples * 32767.0).astype("<i2").tobytes()
        tag, bits = 1, 16
    elif fmt == "S32LE":
        data = np.trunc(samples * 2147483647.0).astype("<i4").tobytes()
        tag, bits = 1, 32
    else:
        raise ValueError("no WAV form for " + fmt)
    align = channels * bits // 8
    with open(path, "wb") as f:
        f.write(b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE")
        f.write(b"fmt " + struct.pack("<IHHIIHH", 16, tag, channels, rate,
                                      rate * align, align, bits))
        f.write(b"data" + struct.pack("<I", len(data)) + data)


def noise_source(source, seed, path):
    """The source of a noise audiotestsrc would play, drawn from @seed
    into the WAV file @path; None when @source is no noise."""
    m = NOISE_RE.match(source)
    if not m:
        return None
    wave_, volume, buffers, per, fmt, rate, channels = m.groups()
    n = int(buffers) * int(per) * int(channels)
    gen = np.random.default_rng(seed)
    values = (white_noise if wave_ == "white-noise" else pink_noise)(gen, n)
    write_wav_format(path, int(rate), int(channels), fmt,
                     values * float(volume))
    return "filesrc location=%s ! wavparse" % path


def render(tools, specs, seed):
    """The log-mel windows npuaudiotok makes: float32 [n, MELS, FRAMES].
    Noises are drawn from @seed and each source's text (noise_source())."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        sources = []
        for i, s in enumerate(specs):
            path = os.path.join(d, "noise-%d.wav" % i)
            sources.append(noise_source(
                s[0], [seed, i, zlib.crc32(s[0].encode())], path) or s[0])
        a = run_in_parts([os.path.join(tools, "npu-render-audio"), "--mels",
                          str(MELS), "--frames", str(FRAMES)], sources, d,
                         MELS * FRAMES)
    return a.reshape(len(specs), MELS, FRAMES)


# how many renderers run at once (train.py's --threads)
JOBS = 1


def run_in_parts(argv, lines, directory, item):
    """Runs the renderer @argv ("-o FILE" added) over @lines dealt into
    JOBS parts (line i to part i % JOBS: the costly kinds come in runs),
    each its own process, all at once; returns the float32 outputs,
    @item floats a line, in the lines' order.  Each line is rendered
    alone, so the parts give the bytes one process would."""
    jobs = max(1, min(JOBS, len(lines)))
    procs = []
    for k in range(jobs):
        spec = os.path.join(directory, "part-%d.txt" % k)
        out = os.path.join(directory, "part-%d.f32" % k)
        with open(spec, "w") as f:
            f.write("".join(line + "\n" for line in lines[k::jobs]))
        with open(spec, "rb") as f:
            procs.append((subprocess.Popen(argv + ["-o", out], stdin=f,
                                           stdout=subprocess.DEVNULL), out))
    failed = [p.args for p, _ in procs if p.wait() != 0]
    if failed:
        raise subprocess.CalledProcessError(1, failed[0])
    a = np.empty((len(lines), item), dtype=np.float32)
    for k, (_, out) in enumerate(procs):
        a[k::jobs] = np.fromfile(out, dtype=np.float32).reshape(-1, item)
    return a
