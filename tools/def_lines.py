#!/usr/bin/env python3
"""Sets lines of a tuned table (registry/tuned/*.def) by key: each given NORMTUNE_TUNED,
NORMTUNE_TUNED_SCALED, NORMTUNE_TUNED_DECODE or NORMTUNE_TUNED_CUDNN line replaces the table's
line of the same macro and key (norm, stage, the four types, the scaling mode of a _SCALED
line, the row class of a _CUDNN line, hidden size), or is appended when the table has none. The rest of the file is left byte for byte. For A/Bs of candidate lines (tools/ab.sh
variant-lines) and for adding a tuned entry by hand.

    def_lines.py DEF_FILE LINE...      LINEs as `normtune tune` prints them; `-` reads them
                                       from stdin, one per line (blank lines and // comments
                                       skipped)
    def_lines.py --self-test           checks itself on a table in memory
"""
import re
import sys

_HEAD = re.compile(r"^(NORMTUNE_TUNED(?:_SCALED|_DECODE|_CUDNN)?)\(([^()]*?),\s*\(")
# Fields before the first parenthesis: the key (entries.cuh's macros).
_KEY_FIELDS = {"NORMTUNE_TUNED": 7, "NORMTUNE_TUNED_DECODE": 7, "NORMTUNE_TUNED_SCALED": 8, "NORMTUNE_TUNED_CUDNN": 8}


def line_key(line):
    """The key of a table line, or None when the line is not one."""
    m = _HEAD.match(line.strip())
    if not m:
        return None
    macro, fields = m.group(1), [f.strip() for f in m.group(2).split(",")]
    if len(fields) != _KEY_FIELDS[macro] or not fields[-1].isdigit():
        return None
    return (macro, *fields)


def set_lines(text, new_lines):
    """text with each of new_lines replacing its key's line, or appended; and what happened."""
    lines = text.splitlines(keepends=True)
    index = {}
    for n, line in enumerate(lines):
        key = line_key(line)
        if key is not None:
            if key in index:
                raise ValueError(f"the table has two lines for {key}: lines {index[key] + 1} and {n + 1}")
            index[key] = n
    report = []
    seen = set()
    for new in new_lines:
        new = new.strip()
        key = line_key(new)
        if key is None:
            raise ValueError(f"not a table line (NORMTUNE_TUNED(norm, stage, 4 types, hidden, (plan), (provenance))): {new[:120]}")
        if key in seen:
            raise ValueError(f"two of the given lines have the key {key}")
        seen.add(key)
        if not new.endswith(")"):
            raise ValueError(f"a table line ends with ')': {new[:120]}")
        if key in index:
            lines[index[key]] = new + "\n"
            report.append(f"replaced line {index[key] + 1}: {', '.join(key[1:])}")
        else:
            if lines and not lines[-1].endswith("\n"):
                lines[-1] += "\n"
            lines.append(new + "\n")
            index[key] = len(lines) - 1
            report.append(f"appended line {len(lines)}: {', '.join(key[1:])}")
    return "".join(lines), report


def _self_test():
    table = (
        "// comment (RMSNorm, Forward, ...)\n"
        'NORMTUNE_TUNED(RMSNorm, Forward, bf16, bf16, bf16, fp32, 4096, (.layout = FwdLayout::kRegisters, '
        '.vecs_per_thread = 2), (.device = "H", .date = "d", .time_us = 1.0, .tool = "t, 8192x4096"))\n'
        'NORMTUNE_TUNED_SCALED(RMSNorm, Forward, bf16, bf16, fp8e4m3, fp32, Mxfp8_1D, 4096, (.layout = '
        'FwdLayout::kStaged), (.device = "H", .date = "d", .time_us = 2.0, .tool = "t"))\n'
    )
    new_fwd = ('NORMTUNE_TUNED(RMSNorm, Forward, bf16, bf16, bf16, fp32, 4096, (.layout = FwdLayout::kStaged), '
               '(.device = "H", .date = "e", .time_us = 0.5, .tool = "t"))')
    new_ln = new_fwd.replace("RMSNorm", "LayerNorm")
    out, report = set_lines(table, [new_fwd, new_ln])
    got = out.splitlines()
    assert got[0] == "// comment (RMSNorm, Forward, ...)", got[0]
    assert got[1] == new_fwd and got[2].startswith("NORMTUNE_TUNED_SCALED") and got[3] == new_ln, got
    assert report[0].startswith("replaced line 2") and report[1].startswith("appended line 4"), report
    # the scaled line has its own key: replacing the unscaled one left it alone; it is replaced by its own
    new_scaled = got[2].replace("time_us = 2.0", "time_us = 3.0")
    out2, report2 = set_lines(out, [new_scaled])
    assert out2.splitlines()[2] == new_scaled and report2[0].startswith("replaced line 3"), report2
    decode = new_fwd.replace("NORMTUNE_TUNED(", "NORMTUNE_TUNED_DECODE(")
    cudnn = 'NORMTUNE_TUNED_CUDNN(RMSNorm, Forward, bf16, bf16, bf16, fp32, Decode, 4096, (.device = "H"))'
    out3, report3 = set_lines(out2, [decode, cudnn, cudnn.replace("Decode", "Any")])
    assert [r.split(":")[0] for r in report3] == ["appended line 5", "appended line 6", "appended line 7"], report3
    out4, report4 = set_lines(out3, [cudnn.replace('"H"', '"I"')])
    assert report4 == ["replaced line 6: RMSNorm, Forward, bf16, bf16, bf16, fp32, Decode, 4096"], report4
    for bad in ["NORMTUNE_TUNED(RMSNorm, Forward, bf16)", "// NORMTUNE_TUNED", new_fwd.rstrip(")")]:
        try:
            set_lines(table, [bad])
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    try:
        set_lines(table, [new_fwd, new_fwd])
        raise AssertionError("accepted the same key twice")
    except ValueError:
        pass
    try:
        set_lines(table + table.splitlines(keepends=True)[1], [new_ln])
        raise AssertionError("accepted a table with a key twice")
    except ValueError:
        pass
    print("def_lines.py: self-test passed")


def main(argv):
    if argv[1:] == ["--self-test"]:
        _self_test()
        return 0
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, given = argv[1], argv[2:]
    if given == ["-"]:
        given = [l for l in sys.stdin.read().splitlines() if l.strip() and not l.strip().startswith("//")]
        if not given:
            print("def_lines.py: no table line on stdin", file=sys.stderr)
            return 1
    with open(path) as f:
        text = f.read()
    try:
        out, report = set_lines(text, given)
    except ValueError as e:
        print(f"def_lines.py: {path}: {e}", file=sys.stderr)
        return 1
    with open(path, "w") as f:
        f.write(out)
    for r in report:
        print(f"{path}: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
