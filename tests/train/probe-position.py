#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Can the vision encoder learn where the ball is?  (docs/trained-models.md)

Trains train.py's vision encoder alone, with a training-only head that
names the ball's quarter from the mean of its 16 rows (as --vision-aux
does, the quarter only), on the balls of a run's rendered sets, once for
each standard deviation the position table is initialised at, and prints
how many quarters it names right on the training, held-out and
camera-sized (camera-balls.txt) balls.  A developer's probe: it reads the
sets that a run of train.py kept with --cache.

    tests/train/probe-position.py --cache CACHE --steps 400 --pos-std 0.02 1.0
"""

import argparse
import os
import re
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import train  # noqa: E402

QUARTERS = ["top left", "top right", "bottom left", "bottom right"]


def balls(x, metas):
    """The balls of a set and their quarters' indices."""
    idx = [i for i, m in enumerate(metas) if m[0] == "ball"]
    quarter = [QUARTERS.index(re.search(r"(top|bottom) (left|right)",
                                        metas[i][1]).group(0)) for i in idx]
    return torch.from_numpy(x[idx]), torch.tensor(quarter)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", required=True,
                    help="train.py's --cache (CACHE.vision.npz)")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--pos-std", type=float, nargs="+", default=[0.02])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    c = np.load(args.cache + ".vision.npz", allow_pickle=True)
    xb, yb = balls(c["x"], c["meta"].tolist())
    hxb, hyb = balls(c["hx"], c["hmeta"].tolist())
    exb, eyb = balls(c["ex"], c["emeta"].tolist())
    train.IMAGE = int(round((xb.shape[2] // 3) ** 0.5)) * 8
    train.PATCH = train.IMAGE // 8

    for std in args.pos_std:
        torch.manual_seed(train.SEED)
        vis, head = train.Vision(), nn.Linear(train.T_DIM, 4)
        with torch.no_grad():
            vis.pos.normal_(0, std)
        params = list(vis.parameters()) + list(head.parameters())
        opt = torch.optim.AdamW(params, lr=3e-3, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, 3e-3, args.steps,
                                                    pct_start=0.1)
        t0 = time.time()
        for _ in range(args.steps):
            idx = torch.randint(len(xb), (args.batch,))
            loss = F.cross_entropy(head(vis(xb[idx]).mean(1)), yb[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()

        def right(x, y):
            with torch.no_grad():
                got = head(vis(x).mean(1)).argmax(-1)
            return "%d of %d" % (int((got == y).sum()), len(y))
        print("position table std %.2f, %d steps: quarters right: training "
              "balls %s, held-out balls %s, camera-balls.txt %s; position "
              "norms %.2f (%.0f s)" %
              (std, args.steps, right(xb, yb), right(hxb, hyb),
               right(exb, eyb), vis.pos.norm(dim=1).mean().item(),
               time.time() - t0), flush=True)


if __name__ == "__main__":
    sys.exit(main())
