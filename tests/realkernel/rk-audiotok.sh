#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# rk-audiotok.sh BUILD SYSPLUGINS: run in the guest after snd-aloop is
# loaded.  A WAV (1 s of silence, 1.5 s of sound, 1 s of silence; 16 kHz
# mono S16LE) is played with alsasink into the ALSA loopback and captured
# with alsasrc into npuaudiotok; the tokens must equal, byte for byte, those
# of the same WAV read with filesrc.  vad-split lets the voice place the
# chunk (a hangover before the first loud sample), so where the capture
# happened to start does not matter.
set -eu
BUILD=$1
export GST_PLUGIN_SYSTEM_PATH_1_0=$2 GST_PLUGIN_PATH_1_0=$BUILD/gst/elements
W=/tmp/rk-audio
mkdir -p "$W"
GEN=$BUILD/tests/tools/npu-model-gen
"$GEN" text --arch qwen2 --size tiny -o "$W/text.gguf" >/dev/null
"$GEN" audio --for "$W/text.gguf" --size tiny -o "$W/audio.gguf" >/dev/null
python3 - "$W/speech.wav" <<'PY'
import math, struct, sys, wave
rate = 16000
s = [0.0] * rate
for i in range(int(1.5 * rate)):
    t = i / rate
    s.append(0.3 * math.sin(2 * math.pi * 220 * t) +
             0.2 * math.sin(2 * math.pi * (400 + 600 * t) * t) +
             0.05 * math.sin(2 * math.pi * 3100 * t + 1.0))
s += [0.0] * rate
w = wave.open(sys.argv[1], 'wb')
w.setnchannels(1); w.setsampwidth(2); w.setframerate(rate)
w.writeframes(b''.join(struct.pack('<h', int(round(32767 * x))) for x in s))
w.close()
PY
TOK="npuaudiotok model=$W/audio.gguf vad-split=true vad-hangover=300000000 chunk-duration=5000000000 n-threads=1"

gst-launch-1.0 -q --no-position filesrc location="$W/speech.wav" ! wavparse ! $TOK ! \
  filesink location="$W/file.f32"

cat /proc/asound/cards
gst-launch-1.0 -q --no-position -e alsasrc device=hw:Loopback,1,0 ! \
  audio/x-raw,format=S16LE,rate=16000,channels=1 ! $TOK ! \
  filesink location="$W/alsa.f32" &
cap=$!
sleep 2
gst-launch-1.0 -q --no-position filesrc location="$W/speech.wav" ! wavparse ! \
  alsasink device=hw:Loopback,0,0
sleep 1
kill -INT "$cap"
wait "$cap" || true

ls -l "$W/file.f32" "$W/alsa.f32"
[ -s "$W/file.f32" ] || { echo "no tokens from filesrc"; exit 1; }
if cmp "$W/file.f32" "$W/alsa.f32"; then
  echo "alsasrc ! npuaudiotok: $(stat -c %s "$W/alsa.f32") bytes of tokens, the same as filesrc's"
else
  echo "alsasrc and filesrc tokens differ"; exit 1
fi
