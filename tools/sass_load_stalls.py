#!/usr/bin/env python3
"""Global loads that a row loop waits for at once: in a SASS listing (cuobjdump -sass), an LDG
inside a loop whose result an R2UR (move to a uniform register) reads within a few instructions.

ptxas moves a value every thread of a warp loads from the same address (a row's statistics,
say) into a uniform register; where registers are scarce it does so right after the load, so
the warp waits for the load there, once per trip of the loop, instead of where the value is
used. In norm_bwd_pipelined.cuh that cost LayerNorm's 4-vector backward a third of its issue
slots (H200, session 29) until the statistics were relayed through shared memory.

Only loops that synchronize (their body holds a BAR.SYNC or a DEPBAR: the kernels' row loops)
are searched, so a kernel's one-time loads before its loop are mostly not reported; a loop is
an address range (a backward branch and its target), so one-time loads that ptxas placed
inside another loop's range are (LayerNorm's second body's first statistics, for one): read
the listing (--sass) at the addresses given before acting on a report.

  tools/sass_load_stalls.py LISTING [--window N]    LISTING: a file of cuobjdump -sass output
                                                     (tools/sass.sh FILE.cu --load-stalls runs it)
  tools/sass_load_stalls.py --self-test             checks itself on a listing in memory (CI)
Prints each kernel with such loads, one line per load (its address, the load, the R2UR and how
many instructions apart), and exits 0 either way."""
import argparse
import re
import subprocess
import sys

INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNCTION = re.compile(r"Function : (\S+)")
BRANCH = re.compile(r"\bBRA\s+(?:`\(\.L_x_\d+\)\s*)?0x([0-9a-f]+)")
LOAD = re.compile(r"(?:@!?U?P\w+\s+)?LDG\.E(?:\.[\w]+)*\s+(R\d+),")


def functions(text):
    """(mangled name, [(address, instruction text)]) per kernel of the listing."""
    name, body = None, []
    for line in text.splitlines():
        m = FUNCTION.search(line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
            continue
        m = INSTRUCTION.match(line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2)))
    if name:
        yield name, body


def stalls(body, window):
    # Loops: [target, branch] of every backward branch; a load's loop is the smallest holding it.
    loops = []
    for address, text in body:
        m = BRANCH.search(text)
        if m and int(m.group(1), 16) < address:
            loops.append((int(m.group(1), 16), address))
    synchronizing = {
        loop for loop in loops
        if any(loop[0] <= a <= loop[1] and ("BAR.SYNC" in t or "DEPBAR" in t) for a, t in body)
    }
    for i, (address, text) in enumerate(body):
        m = LOAD.match(text)
        if not m:
            continue
        holding = [loop for loop in loops if loop[0] <= address <= loop[1]]
        if not holding or min(holding, key=lambda l: l[1] - l[0]) not in synchronizing:
            continue
        reads = re.compile(r"\bR2UR\s+\w+,\s*" + m.group(1) + r"\b")
        for j in range(i + 1, min(i + 1 + window, len(body))):
            if reads.search(body[j][1]):
                yield address, text, body[j][0], body[j][1], j - i
                break


_SELF_TEST_LISTING = """
		Function : _Z6kernelv
        /*0000*/                   MOV R1, c[0x0][0x28] ;                  /* 0x0 */
        /*0010*/              @!P0 LDG.E R4, desc[UR6][R2.64] ;            /* 0x0 */
        /*0020*/              @!P0 R2UR UR4, R4 ;                          /* 0x0 */
        /*0030*/                   DEPBAR.LE SB0, 0x0 ;                    /* 0x0 */
        /*0040*/                   LDG.E R6, desc[UR6][R2.64] ;            /* 0x0 */
        /*0050*/                   IADD3 R8, R8, 0x1, RZ ;                 /* 0x0 */
        /*0060*/                   R2UR UR5, R6 ;                          /* 0x0 */
        /*0070*/                   LDG.E R7, desc[UR6][R2.64+0x4] ;        /* 0x0 */
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;           /* 0x0 */
        /*0090*/                   FADD R9, R7, R7 ;                       /* 0x0 */
        /*00a0*/               @P1 BRA 0x30 ;                              /* 0x0 */
        /*00b0*/                   LDG.E R10, desc[UR6][R2.64+0x8] ;       /* 0x0 */
        /*00c0*/                   R2UR UR6, R10 ;                         /* 0x0 */
        /*00d0*/               @P2 BRA 0xb0 ;                              /* 0x0 */
        /*00e0*/                   EXIT ;                                  /* 0x0 */
		Function : _Z5otherv
        /*0000*/                   LDG.E R4, desc[UR6][R2.64] ;            /* 0x0 */
        /*0010*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;           /* 0x0 */
        /*0020*/                   R2UR UR4, R4 ;                          /* 0x0 */
        /*0030*/               @P0 BRA 0x0 ;                               /* 0x0 */
"""


def _self_test():
    found = {name: list(stalls(body, 24)) for name, body in functions(_SELF_TEST_LISTING)}
    assert set(found) == {"_Z6kernelv", "_Z5otherv"}, found
    # the row loop's load moved at once (reported); the one a FADD reads (not); the one before
    # the loop (not); the one in a loop without a barrier (not)
    assert [(a, u, n) for a, _, u, _, n in found["_Z6kernelv"]] == [(0x40, 0x60, 2)], found
    assert [(a, n) for a, _, _, _, n in found["_Z5otherv"]] == [(0x0, 2)], found
    # outside the window: not reported
    assert not [h for _, body in functions(_SELF_TEST_LISTING) for h in stalls(body, 1)]
    print("sass_load_stalls.py: self-test passed")
    return 0


def demangle(name):
    try:
        return subprocess.run(["c++filt"], input=name, capture_output=True, text=True).stdout.strip() or name
    except OSError:
        return name


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("listing", nargs="?", help="a file of cuobjdump -sass output")
    parser.add_argument("--self-test", action="store_true", help="check this script on a listing in memory")
    parser.add_argument("--window", type=int, default=24,
                        help="instructions after the load in which an R2UR of its register counts (default 24)")
    args = parser.parse_args(argv[1:])
    if args.self_test:
        return _self_test()
    if args.listing is None:
        parser.error("a LISTING file, or --self-test")
    with open(args.listing) as f:
        text = f.read()
    found = 0
    for name, body in functions(text):
        hits = list(stalls(body, args.window))
        if hits:
            found += 1
            print(demangle(name))
            for address, load, use_address, use, apart in hits:
                print(f"    0x{address:04x} {load}  ->  0x{use_address:04x} {use}  ({apart} apart)")
    print(f"sass_load_stalls: {found} kernel(s) with a global load moved to a uniform register at once in a row loop")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
