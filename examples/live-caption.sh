#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# A live camera stand-in captioned by the trained models of tests/models/
# (docs/trained-models.md): videotestsrc's moving ball, is-live=true, named
# with its colour and the quarter of the frame it is in, the caption drawn
# on the video by textoverlay.  npuvisiontok drops frames while the last
# one is being answered (policy=drop-newest) and npullm answers the latest
# (latest wins), so the captions keep up with the clock.
#
#   examples/live-caption.sh [COLOUR]        # e.g. 0xffff0000 (red)
#   SINK=fakesink RUN_SECONDS=5 examples/live-caption.sh    # no display
#
# npullm's output=caption gives each answer as one text buffer stamped
# with the PTS of the frame it answers and valid for CAPTION_MS (default
# 100 ms).  textoverlay draws it on the frames inside that time and holds
# the next answer back until it is over, so the time must cover an
# answer's delay (about 10-30 ms on a 2-core machine here) plus a frame,
# and the longer it is, the further the caption trails the ball
# (npullm's own live default, at least a second, lags that much).  With
# output=sentence (one frame's duration) the answer about a frame comes
# after that frame was drawn and textoverlay drops it: 7 of 90 frames
# showed a caption.
#
# The captions are printed too (fdsink), one per line: a caption buffer
# has no line break (textoverlay draws the answer as it is), so each
# answer's closing full stop ends its line.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || ./tests/setup.sh
export GST_PLUGIN_PATH="$(pwd)/build/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
M=tests/models
COLOUR=${1:-0xffffff00}
SINK=${SINK:-autovideosink}
CAPTION_MS=${CAPTION_MS:-100}
# num-buffers at 30 frames/s; 0 = until interrupted
FRAMES=$(( ${RUN_SECONDS:-0} * 30 ))
[ "$FRAMES" -gt 0 ] || FRAMES=-1

# shellcheck disable=SC2086
gst-launch-1.0 -q \
  videotestsrc pattern=ball foreground-color="$COLOUR" is-live=true \
    num-buffers=$FRAMES ! \
    video/x-raw,format=NV12,width=320,height=240,framerate=30/1 ! tee name=t \
  t. ! queue leaky=downstream max-size-buffers=1 ! \
    npuvisiontok model=$M/videotestsrc-mmproj.gguf policy=drop-newest ! \
    llm.vision \
  npullm name=llm model=$M/videotestsrc-text.gguf prompt="What do you see?" \
    output=caption caption-duration=$((CAPTION_MS * 1000000)) ! \
    text/x-raw,format=utf8 ! tee name=tt \
  tt. ! queue ! ov.text_sink \
  tt. ! queue ! fdsink \
  t. ! queue ! textoverlay name=ov wait-text=false font-desc="Sans 16" ! \
    videoconvert ! $SINK |
  tr '.' '\n' | sed -u 's/$/./'
