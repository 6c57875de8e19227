#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs what tests/train/train.py needs on Debian 12 or 13 (apt; sudo
# when not root): Debian's PyTorch (CPU) and the threaded OpenBLAS, which
# makes torch's CPU matrix products about 8x faster than the reference BLAS.
# Developer-only: the test suite uses the committed models, not these.
set -eu
PACKAGES="python3 python3-torch python3-numpy libopenblas0-pthread espeak-ng"
SUDO=
if [ "$(id -u)" != 0 ]; then
  SUDO=sudo
fi
missing=
for p in $PACKAGES; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "train/setup: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q >/dev/null
  # shellcheck disable=SC2086
  $SUDO apt-get install -y -q --no-install-recommends $missing >/dev/null
fi
/usr/bin/python3 -c 'import torch; print("train/setup: torch", torch.__version__)'
