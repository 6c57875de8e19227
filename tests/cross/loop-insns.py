#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Static instruction counts of the innermost loops of kernel functions.

Where a kernel's speed cannot be measured (NEON on an x86 machine), the
instructions of its loop say what to expect: this reads objdump's listing
of an object file and prints, for each named function, every innermost
loop (a backward branch with no other backward branch inside), its
instruction count and its loads and stores.  Used for docs/kernels.md:

  tests/cross/loop-insns.py \\
    build-aarch64/gst/core/libnpuvecmath-neon.a.p/cpu_npuvecmath-neon.c.o \\
    npu_silu_mul_neon npu_rms_norm_neon

OBJDUMP in the environment names the objdump (default: the aarch64 cross
one; objdump for x86 objects).
"""
import os
import re
import subprocess
import sys

LINE = re.compile(r'^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$')
FUNC = re.compile(r'^[0-9a-f]+ <(.+)>:$')
TARGET = re.compile(r'(?:^|[ ,])([0-9a-f]+) <')
# AArch64: ld1-4/ldr/ldp/ldur..., st1-4/str/stp/stur...; x86: a memory
# operand in parentheses (loads and stores told apart by operand order)
A64_LOAD = re.compile(r'^(ld[1-4]r?|ldr|ldp|ldur|ldnp)')
A64_STORE = re.compile(r'^(st[1-4]|str|stp|stur|stnp)')


def listing(obj):
    objdump = os.environ.get('OBJDUMP', 'aarch64-linux-gnu-objdump')
    out = subprocess.run([objdump, '-d', '--no-show-raw-insn', obj],
                         check=True, capture_output=True, text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = LINE.match(line)
        if m and cur is not None:
            cur.append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def is_branch(op):
    return (op.startswith('b') and op not in ('bic', 'bif', 'bit', 'bsl')
            or op.startswith('cb') or op.startswith('tb')
            or op.startswith('j'))


def memory(op, args):
    """(loads, stores) of one instruction"""
    if A64_LOAD.match(op):
        return 1, 0
    if A64_STORE.match(op):
        return 0, 1
    if '(' in args:
        # AT&T syntax: the destination is the last operand
        return (0, 1) if args.rstrip().endswith(')') else (1, 0)
    return 0, 0


def loops(insns):
    back = []
    for addr, op, args in insns:
        m = TARGET.search(args)
        if is_branch(op) and m and int(m.group(1), 16) < addr:
            back.append((int(m.group(1), 16), addr))
    for start, end in back:
        if any(start <= s and e <= end and (s, e) != (start, end)
               for s, e in back):
            continue
        body = [i for i in insns if start <= i[0] <= end]
        loads = sum(memory(op, args)[0] for _, op, args in body)
        stores = sum(memory(op, args)[1] for _, op, args in body)
        yield start, end, len(body), loads, stores


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    funcs = listing(sys.argv[1])
    for name in sys.argv[2:]:
        if name not in funcs:
            sys.exit('%s: no function %s' % (sys.argv[1], name))
        for start, end, n, loads, stores in loops(funcs[name]):
            print('%s: loop %#x-%#x: %d instructions, %d loads, %d stores'
                  % (name, start, end, n, loads, stores))


if __name__ == '__main__':
    main()
