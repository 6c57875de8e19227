#!/bin/sh
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
# The captions are printed too (fdsink), one per line: with
# output=sentence npullm ends each sentence with a newline.
set -eu
cd "$(dirname "$0")/.."
[ -f build/build.ninja ] || ./tests/setup.sh
export GST_PLUGIN_PATH="$(pwd)/build/gst/elements${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
M=tests/models
COLOUR=${1:-0xffffff00}
SINK=${SINK:-autovideosink}
# num-buffers at 30 frames/s; 0 = until interrupted
FRAMES=$(( ${RUN_SECONDS:-0} * 30 ))
[ "$FRAMES" -gt 0 ] || FRAMES=-1

gst-launch-1.0 -q \
  videotestsrc pattern=ball foreground-color="$COLOUR" is-live=true \
    num-buffers=$FRAMES ! \
    video/x-raw,format=NV12,width=320,height=240,framerate=30/1 ! tee name=t \
  t. ! queue leaky=downstream max-size-buffers=1 ! \
    npuvisiontok model=$M/videotestsrc-mmproj.gguf policy=drop-newest ! \
    llm.vision \
  npullm name=llm model=$M/videotestsrc-text.gguf prompt="What do you see?" \
    output=sentence ! text/x-raw,format=utf8 ! tee name=tt \
  tt. ! queue ! ov.text_sink \
  tt. ! queue ! fdsink \
  t. ! queue ! textoverlay name=ov wait-text=false font-desc="Sans 16" ! \
    videoconvert ! $SINK
