#!/usr/bin/env python3
"""Global loads a thread issues only after one of its stores, then stores again: in a SASS
listing (cuobjdump -sass), within a stretch of a kernel between two synchronizations
(BAR.SYNC, DEPBAR, SYNCS, EXIT), the LDGs that come after an STG and before a later STG.

The compiler does not move a load above a store that may alias it (a kernel's pointers come
in a struct of parameters: residual_out may be x, for all it knows), and a store waits for
the data it stores. So a loop that loads a vector, stores a result of it and loads the next
one runs as a chain: each load waits one full memory latency after the previous, and the
thread has one vector in flight instead of all of them. The fused add + RMSNorm forward's
register kernel was such a chain (x and residual loaded, x + residual stored to
residual_out, vector by vector: four DRAM round trips per row where one would do; session
40, docs/perf/h200_2026-12-04_s40/). A chain of L1 hits (gamma, reloaded per vector) costs
far less than one of DRAM loads: read the loads' addresses in the listing (--sass) before
acting on a report.

  tools/sass_store_load_chains.py LISTING [--max-rounds N]
                                             LISTING: a file of cuobjdump -sass output
                                             (tools/sass.sh FILE.cu --store-load-chains runs it);
                                             with --max-rounds, exit 1 when a kernel's stretch
                                             has more rounds than N (a CI gate for kernels
                                             fixed not to chain)
  tools/sass_store_load_chains.py --self-test    checks itself on a listing in memory (CI)
Prints each kernel with such loads: per stretch, its address range, how many times the thread
goes back to loading after a store ("rounds": the memory round trips the chain adds) and the
loads; exits 0 unless --max-rounds is exceeded."""
import argparse
import contextlib
import io
import re
import sys
import tempfile

from sass_load_stalls import demangle, functions  # (the same listing format; this directory)

PREDICATE = re.compile(r"^@!?U?P\w+\s+")
# LDGSTS and LDGDEPBAR are asynchronous copies into shared memory (nothing waits for them at
# the load); REDG/ATOMG are not loads a later store waits for.
LOAD = re.compile(r"^LDG\.")
STORE = re.compile(r"^STG\.")
SYNC = re.compile(r"^(BAR\.SYNC|BAR\.RED|DEPBAR|SYNCS|EXIT)\b")


def chains(body):
    """Per stretch with a chain: (first address, last address, rounds, [(address, load)])."""
    stretch = []

    def close():
        stores = [i for i, (_, text) in enumerate(stretch) if STORE.match(text)]
        if len(stores) < 2:
            return None
        # A round: loads after a store that came after a load (a store that may have waited
        # for it); loads after a store that waited for none cost no extra trip.
        rounds, loads, loaded, waited = 0, [], False, False
        for i in range(stores[-1]):
            address, text = stretch[i]
            if STORE.match(text):
                waited = waited or loaded
            elif LOAD.match(text):
                loaded = True
                if i > stores[0]:
                    loads.append((address, text))
                if waited:
                    rounds += 1
                    waited = False
        return (stretch[0][0], stretch[-1][0], rounds, loads) if rounds else None

    for address, text in body:
        text = PREDICATE.sub("", text)
        if SYNC.match(text):
            found = close()
            if found:
                yield found
            stretch = []
        else:
            stretch.append((address, text))
    found = close()
    if found:
        yield found


_SELF_TEST_LISTING = """
		Function : _Z5chainv
        /*0000*/                   LDG.E.128 R4, desc[UR6][R2.64] ;             /* 0x0 */
        /*0010*/                   LDG.E.128 R8, desc[UR6][R12.64] ;            /* 0x0 */
        /*0020*/                   STG.E.128 desc[UR6][R14.64], R4 ;            /* 0x0 */
        /*0030*/                   LDG.E.128 R4, desc[UR6][R2.64+0x100] ;       /* 0x0 */
        /*0040*/              @!P0 LDG.E.128 R8, desc[UR6][R12.64+0x100] ;      /* 0x0 */
        /*0050*/                   FADD R4, R4, R8 ;                            /* 0x0 */
        /*0060*/                   STG.E.128 desc[UR6][R14.64+0x100], R4 ;      /* 0x0 */
        /*0070*/                   LDG.E.128.CONSTANT R4, desc[UR6][R2.64+0x200] ; /* 0x0 */
        /*0080*/                   STG.E.128 desc[UR6][R14.64+0x200], R4 ;      /* 0x0 */
        /*0090*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                /* 0x0 */
        /*00a0*/                   STG.E.128 desc[UR6][R14.64], R4 ;            /* 0x0 */
        /*00b0*/                   LDGSTS.E.BYPASS.128 [R1], desc[UR6][R2.64] ; /* 0x0 */
        /*00c0*/                   STG.E.128 desc[UR6][R14.64+0x10], R4 ;       /* 0x0 */
        /*00d0*/                   EXIT ;                                       /* 0x0 */
		Function : _Z7batchedv
        /*0000*/                   LDG.E.128 R4, desc[UR6][R2.64] ;             /* 0x0 */
        /*0010*/                   LDG.E.128 R8, desc[UR6][R2.64+0x100] ;       /* 0x0 */
        /*0020*/                   STG.E.128 desc[UR6][R14.64], R4 ;            /* 0x0 */
        /*0030*/                   STG.E.128 desc[UR6][R14.64+0x100], R8 ;      /* 0x0 */
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                /* 0x0 */
        /*0050*/                   STG.E desc[UR6][R16.64], R20 ;               /* 0x0 */
        /*0060*/                   LDG.E.128 R4, desc[UR6][R2.64] ;             /* 0x0 */
        /*0070*/                   LDG.E.128 R8, desc[UR6][R2.64+0x100] ;       /* 0x0 */
        /*0080*/                   STG.E.128 desc[UR6][R14.64], R4 ;            /* 0x0 */
        /*0090*/                   STG.E.128 desc[UR6][R14.64+0x100], R8 ;      /* 0x0 */
        /*00a0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;                /* 0x0 */
        /*00b0*/                   STG.E.128 desc[UR6][R14.64], R4 ;            /* 0x0 */
        /*00c0*/                   LDG.E.128 R4, desc[UR6][R2.64] ;             /* 0x0 */
        /*00d0*/                   EXIT ;                                       /* 0x0 */
"""


def _self_test():
    found = {name: list(chains(body)) for name, body in functions(_SELF_TEST_LISTING)}
    assert set(found) == {"_Z5chainv", "_Z7batchedv"}, found
    # Three stores with loads between them: two rounds (the pair after the first store counts
    # once, the CONSTANT load after the second once); the loads before the first store are
    # not part of the chain. After the barrier: an asynchronous copy between stores (not a load
    # the thread waits for).
    [(first, last, rounds, loads)] = found["_Z5chainv"]
    assert (first, last, rounds) == (0x0, 0x80, 2), found
    assert [a for a, _ in loads] == [0x30, 0x40, 0x70], loads
    # Loads first, then stores; a store that waited for no load, then loads and stores (a
    # row's statistics, then its output); a load after the last store of its stretch: no chain.
    assert found["_Z7batchedv"] == [], found
    with tempfile.NamedTemporaryFile("w", suffix=".sass") as f:
        f.write(_SELF_TEST_LISTING)
        f.flush()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["x", f.name, "--max-rounds", "2"]) == 0
            assert main(["x", f.name, "--max-rounds", "1"]) == 1
            assert main(["x", f.name]) == 0
    print("sass_store_load_chains.py: self-test passed")
    return 0


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("listing", nargs="?", help="a file of cuobjdump -sass output")
    parser.add_argument("--self-test", action="store_true", help="check this script on a listing in memory")
    parser.add_argument("--max-rounds", type=int, default=None,
                        help="exit 1 when a kernel's stretch has more rounds than this")
    args = parser.parse_args(argv[1:])
    if args.self_test:
        return _self_test()
    if args.listing is None:
        parser.error("a LISTING file, or --self-test")
    with open(args.listing) as f:
        text = f.read()
    found, worst = 0, 0
    for name, body in functions(text):
        hits = list(chains(body))
        if hits:
            found += 1
            worst = max(worst, max(rounds for _, _, rounds, _ in hits))
            print(demangle(name))
            for first, last, rounds, loads in hits:
                print(f"    0x{first:04x}-0x{last:04x}: {rounds} round(s) of loads after a store")
                for address, load in loads:
                    print(f"        0x{address:04x} {load}")
    print(f"sass_store_load_chains: {found} kernel(s) that load again after a store before storing again")
    if args.max_rounds is not None and worst > args.max_rounds:
        print(f"sass_store_load_chains: {worst} rounds in one stretch, more than --max-rounds {args.max_rounds}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
