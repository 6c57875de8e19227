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
import subprocess
import wave

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
# What npu-render-audio does beyond playing the source, for the cache key:
# since it writes 0 into the frame audiotestsrc's ticks leave unwritten
# (tests/npuaudioticks.h), a cache of sounds rendered before is stale
RENDERER = "ticks completed"

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
        props += " freq=%.1f" % math.exp(rng.uniform(math.log(100),
                                                     math.log(2000)))
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
        n = per_kind * (4 if kind == "sine" else 1)
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


def render(tools, specs):
    """The log-mel windows npuaudiotok makes: float32 [n, MELS, FRAMES]."""
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "mel.f32")
        subprocess.run([os.path.join(tools, "npu-render-audio"), "--mels",
                        str(MELS), "--frames", str(FRAMES), "-o", out],
                       input="".join(s[0] + "\n" for s in specs).encode(),
                       check=True, stdout=subprocess.DEVNULL)
        a = np.fromfile(out, dtype=np.float32)
    return a.reshape(len(specs), MELS, FRAMES)
