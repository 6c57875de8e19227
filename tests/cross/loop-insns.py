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
one; objdump for x86 objects).  With --where first, each loop also gets
its place in the source: the chain of inlined functions and lines of its
backward branch (from the object's debug lines, objdump -dl --inlines),
innermost first, so that the loops of a kernel whose loops are all
inlined into one function (the attention) can be told apart:

  tests/cross/loop-insns.py --where \
    build-aarch64/gst/core/libnpuattention-neon.a.p/cpu_npuattention-kernel.c.o \
    npu_attention_rows_neon
"""
import os
import re
import subprocess
import sys

SRC = re.compile(r'^(?:inlined by )?\S+:(\d+)(?: \(discriminator \d+\))?'
                 r'(?: \((\S+)\))?$')
INNER = re.compile(r'^(\S+)\(\):$')
LINE = re.compile(r'^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$')
FUNC = re.compile(r'^[0-9a-f]+ <(.+)>:$')
TARGET = re.compile(r'(?:^|[ ,])([0-9a-f]+) <')
# AArch64: ld1-4/ldr/ldp/ldur..., st1-4/str/stp/stur...; x86: a memory
# operand in parentheses (loads and stores told apart by operand order)
A64_LOAD = re.compile(r'^(ld[1-4]r?|ldr|ldp|ldur|ldnp)')
A64_STORE = re.compile(r'^(st[1-4]|str|stp|stur|stnp)')


def listing(obj, where=False):
    """{function: [(address, op, args)]}, and with @where {address: the
    source chain 'f:line < caller:line < ...'}"""
    objdump = os.environ.get('OBJDUMP', 'aarch64-linux-gnu-objdump')
    cmd = [objdump, '-d', '--no-show-raw-insn', obj]
    if where:
        cmd[1:2] = ['-dl', '--inlines']
    out = subprocess.run(cmd, check=True, capture_output=True,
                         text=True).stdout
    funcs, cur, places = {}, None, {}
    inner, chain, fresh = '?', [], False
    for line in out.splitlines():
        m = FUNC.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = INNER.match(line) if where else None
        if m:
            inner = m.group(1)
            continue
        m = SRC.match(line) if where else None
        if m:
            if not line.startswith('inlined by '):
                # a new innermost place; its callers follow
                chain, fresh = ['%s:%s' % (inner, m.group(1))], True
            elif fresh:
                chain.append('%s:%s' % (m.group(2), m.group(1)))
            continue
        m = LINE.match(line)
        if m and cur is not None:
            fresh = False
            cur.append((int(m.group(1), 16), m.group(2), m.group(3)))
            places[int(m.group(1), 16)] = ' < '.join(chain)
    return funcs, places


def is_branch(op):
    # calls are not loops (in an object file an external callee's address
    # is 0, which looked like a backward branch)
    if op in ('bl', 'blr', 'call', 'callq'):
        return False
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
    args = sys.argv[1:]
    where = bool(args) and args[0] == '--where'
    if where:
        args = args[1:]
    if len(args) < 2:
        sys.exit(__doc__)
    funcs, places = listing(args[0], where)
    for name in args[1:]:
        if name not in funcs:
            sys.exit('%s: no function %s' % (args[0], name))
        for start, end, n, loads, stores in loops(funcs[name]):
            print('%s: loop %#x-%#x: %d instructions, %d loads, %d stores'
                  % (name, start, end, n, loads, stores))
            if where:
                print('  at %s' % places.get(end, '?'))


if __name__ == '__main__':
    main()
