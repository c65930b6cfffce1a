#!/usr/bin/env python3
"""The archives of tools/prebuilt.sh (see there).

  prebuilt.py manifest SRC OUT                   SRC's source files on stdin (NUL-separated,
                                                 relative to SRC): their sha256 into OUT (JSON),
                                                 taken before the build
  prebuilt.py pack SRC BUILD suite|cli ARCHIVE MANIFEST
                                                 BUILD's files that running needs, and that
                                                 manifest, into ARCHIVE
  prebuilt.py check SRC BUILD ARCHIVE NEED       exit 0 when ARCHIVE holds NEED (suite, or cli:
                                                 a suite holds the CLI too) for BUILD and SRC's
                                                 files are the manifest's (the same names, the
                                                 same sha256); else 1, saying why
  prebuilt.py unpack SRC BUILD ARCHIVE NEED      that check, then BUILD from ARCHIVE: unpacked
                                                 beside it, its CLI run once (--help: the
                                                 library resolves), then put in BUILD's place
  prebuilt.py carry-plan LIMIT TREE FINAL NAME=BYTES...
                                                 which archives travel in which device call
                                                 when together they exceed one call's LIMIT
                                                 bytes: each call also carries the tree (TREE
                                                 bytes), the last one FINAL bytes more (the
                                                 other paths it carries); prints one line per
                                                 call, the archives' names (the last line:
                                                 the final call's); exit 1 when one archive
                                                 cannot travel at all
  prebuilt.py --self-test

The manifest holds the files a build reads (sources, headers, tables, CMake files; not docs/,
*.md, or the Python and shell scripts, which no build step runs), so that a note or a tool
edited after packing does not make the archive stale. Paths in the archive are relative to BUILD's parent, which is
the same folder on both machines (BUILD's absolute path is kept and checked).
"""
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

MANIFEST = "prebuilt-manifest.json"


BUILD_INPUTS = (".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".c", ".def", ".cmake", ".in", ".txt", ".json")


def counts(path):
    """Whether a source file can change the CMake build: sources, headers, tables and build
    scripts, outside docs/, the PyTorch package (python/, pyproject.toml: built on its own) and
    the dot-folders (.ci, .git, .prebuilt, ...)."""
    parts = path.split("/")
    return (path.endswith(BUILD_INPUTS) and parts[0] not in ("docs", "python", "pyproject.toml")
            and not parts[0].startswith(".") and "__pycache__" not in parts)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest_of(src, names):
    return {n: sha256(os.path.join(src, n)) for n in sorted(names) if counts(n) and os.path.isfile(os.path.join(src, n))}


def wanted(rel, target):
    """BUILD's files (relative to BUILD) that ctest / the CLI need: not objects or build rules."""
    parts = rel.split("/")
    if "CMakeFiles" in parts or "generated" in parts or parts[0] == "Testing":
        return False
    if rel.endswith((".o", ".ninja", ".a")) or parts[-1].startswith(".ninja"):
        return False
    if target == "cli":
        return rel == "tools/normtune" or parts[-1].startswith("libnormtune.so")
    return True


def pack(src, build, target, archive, sources):
    src, build = os.path.abspath(src), os.path.abspath(build)
    meta = {"build": build, "src": src, "target": target, "sources": sources}
    parent, base = os.path.dirname(build), os.path.basename(build)
    tmp = archive + ".tmp"
    with tarfile.open(tmp, "w:xz", preset=9) as tar:
        for dirpath, dirnames, filenames in os.walk(build):
            dirnames.sort()
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                rel = os.path.relpath(full, build)
                if wanted(rel, target):
                    tar.add(full, arcname=os.path.join(base, rel), recursive=False)
        data = json.dumps(meta, indent=0, sort_keys=True).encode()
        info = tarfile.TarInfo(os.path.join(base, MANIFEST))
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, archive)
    size = os.path.getsize(archive)
    print(f"prebuilt: {archive} ({size / 2**20:.1f} MiB, {len(meta['sources'])} source files in its manifest); "
          f"on the device: carry [\".prebuilt\"] (64 MiB in all with the other carried paths)")


def tree_names(src):
    """SRC's files as the device's copy has them: every file under it but build folders and
    ignored clutter (a stray file there only makes the archive look stale: a build, not a wrong
    result)."""
    names = []
    for dirpath, dirnames, filenames in os.walk(src):
        rel_dir = os.path.relpath(dirpath, src)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if not (d.startswith("build") or d.startswith(".") or
                                                       d in ("ab_base", "ab_var", "out"))]
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            if not rel.startswith("."):
                names.append(rel)
    return names


def check(src, build, archive, need, tar):
    """Why ARCHIVE (open as `tar`) cannot stand for BUILD built from SRC with NEED, or None."""
    meta = json.load(tar.extractfile(os.path.join(os.path.basename(build), MANIFEST)))
    if meta["build"] != build:
        return f"{archive} was built for {meta['build']}, not {build}"
    if need == "suite" and meta["target"] != "suite":
        return f"{archive} holds the CLI only (tools/prebuilt.sh pack makes the suite)"
    want = meta["sources"]
    have = manifest_of(src, [n for n in tree_names(src) if counts(n)])
    changed = sorted(n for n in set(want) | set(have) if want.get(n) != have.get(n))
    if changed:
        return (f"{archive} is stale ({len(changed)} source files differ: "
                f"{', '.join(changed[:5])}{' ...' if len(changed) > 5 else ''})")
    return None


def open_checked(src, build, archive, need):
    """ARCHIVE open, when it can stand for BUILD; else None, having said why."""
    tar = tarfile.open(archive, "r:xz")
    why = check(os.path.abspath(src), os.path.abspath(build), archive, need, tar)
    if why is None:
        return tar
    tar.close()
    print(f"prebuilt: {why}", file=sys.stderr)
    return None


def unpack(src, build, archive, need):
    build = os.path.abspath(build)
    tar = open_checked(src, build, archive, need)
    if tar is None:
        return 1
    base = os.path.basename(build)
    staging = tempfile.mkdtemp(prefix=".prebuilt-", dir=os.path.dirname(build))
    try:
        with tar:
            # (Python without extraction filters, before 3.11.4 and 3.12, takes no filter.)
            tar.extractall(staging, **({"filter": "tar"} if hasattr(tarfile, "data_filter") else {}))
        unpacked = os.path.join(staging, base)
        cli = os.path.join(unpacked, "tools", "normtune")
        paths = [unpacked] + ([os.environ["LD_LIBRARY_PATH"]] if os.environ.get("LD_LIBRARY_PATH") else [])
        env = dict(os.environ, LD_LIBRARY_PATH=os.pathsep.join(paths))
        try:
            ran = subprocess.run([cli, "--help"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            ran = False
        if not ran:
            print(f"prebuilt: {base}'s CLI does not run here", file=sys.stderr)
            return 1
        # BUILD's old folder moves into the staging folder (removed below with it), then the
        # unpacked one takes its place: a failure leaves either whole.
        if os.path.lexists(build):
            os.rename(build, os.path.join(staging, base + ".old"))
        os.rename(unpacked, build)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"prebuilt: {base} unpacked from {archive} (nothing built here)")
    return 0


def carry_plan(limit, tree, final, archives):
    """Calls, in order, as lists of archive names: the last is the final call (tree + final
    bytes + its archives), the others staging calls (tree + archives), each within limit;
    the largest archives first, the final call filled first, then as few staging calls as
    first-fit finds. None when an archive fits no call."""
    if any(tree + size > limit for _, size in archives):
        return None
    final_call, room, rest = [], limit - tree - final, []
    for name, size in sorted(archives, key=lambda a: -a[1]):
        if size <= room:
            final_call.append(name)
            room -= size
        else:
            rest.append((name, size))
    staging = []  # [names, room]
    for name, size in rest:
        for call in staging:
            if size <= call[1]:
                call[0].append(name)
                call[1] -= size
                break
        else:
            staging.append([[name], limit - tree - size])
    return [names for names, _ in staging] + [final_call]


def self_test():
    with tempfile.TemporaryDirectory() as d:
        src, build = os.path.join(d, "src"), os.path.join(d, "src", "build-x")
        os.makedirs(os.path.join(src, "lib"))
        os.makedirs(os.path.join(build, "tools"))
        os.makedirs(os.path.join(build, "CMakeFiles"))
        os.makedirs(os.path.join(build, "lib", "generated"))
        for name, text in [("lib/a.cu", "A"), ("CMakeLists.txt", "C"), ("README.md", "R")]:
            with open(os.path.join(src, name), "w") as f:
                f.write(text)
        for name in ["libnormtune.so.0", "CMakeFiles/x.o", "lib/generated/g.cu", "tests_x"]:
            with open(os.path.join(build, name), "w") as f:
                f.write(name)
        cli = os.path.join(build, "tools", "normtune")
        with open(cli, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(cli, 0o755)
        archive = os.path.join(d, "b.tar.xz")
        pack(src, build, "cli", archive, manifest_of(src, ["lib/a.cu", "CMakeLists.txt", "README.md"]))
        with tarfile.open(archive) as tar:
            got = sorted(tar.getnames())
        assert got == ["build-x/libnormtune.so.0", "build-x/prebuilt-manifest.json", "build-x/tools/normtune"], got
        with open(os.path.join(src, "README.md"), "w") as f:
            f.write("a note: not a build input")
        assert unpack(src, build, archive, "suite") == 1, "a CLI archive stands for a suite"
        assert os.path.exists(os.path.join(build, "tests_x")), "a refused archive touched BUILD"
        assert unpack(src, build, archive, "cli") == 0
        assert os.path.isfile(cli) and not os.path.exists(os.path.join(build, "tests_x")), "BUILD not replaced"
        assert not [n for n in os.listdir(src) if n.startswith(".prebuilt-")], "staging left behind"
        with open(os.path.join(src, "lib/a.cu"), "w") as f:
            f.write("B")
        assert unpack(src, build, archive, "cli") == 1, "an edited source must make it stale"
        with open(os.path.join(src, "lib/a.cu"), "w") as f:
            f.write("A")
        with open(os.path.join(src, "lib/new.cu"), "w") as f:
            f.write("N")
        assert unpack(src, build, archive, "cli") == 1, "a new source must make it stale"
        os.remove(os.path.join(src, "lib/new.cu"))
        assert unpack(src, os.path.join(d, "src", "elsewhere", "build-x"), archive, "cli") == 1, "another path"
        with open(cli, "w") as f:
            f.write("#!/bin/sh\nexit 1\n")
        pack(src, build, "cli", archive, manifest_of(src, ["lib/a.cu", "CMakeLists.txt", "README.md"]))
        with open(cli, "w") as f:
            f.write("kept")
        assert unpack(src, build, archive, "cli") == 1, "a CLI that does not run was accepted"
        with open(cli) as f:
            assert f.read() == "kept", "BUILD replaced by an archive whose CLI does not run"
    mib = 1 << 20
    five = [("build-gpu", 23 * mib), ("v1", 23 * mib), ("v2", 23 * mib), ("v3", 23 * mib), ("v4", 23 * mib)]
    plan = carry_plan(64 * mib, 16 * mib, 9 * mib, five)
    assert [len(c) for c in plan] == [2, 2, 1] and sorted(sum(plan, [])) == sorted(n for n, _ in five), plan
    assert carry_plan(64 * mib, 16 * mib, 0, five[:2]) == [["build-gpu", "v1"]]
    assert carry_plan(64 * mib, 16 * mib, 40 * mib, five[:1]) == [["build-gpu"], []]
    assert carry_plan(64 * mib, 16 * mib, 0, [("huge", 49 * mib)]) is None
    print("prebuilt.py: self-test passed")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) == 4 and argv[1] == "manifest":
        names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
        with open(argv[3], "w") as f:
            json.dump(manifest_of(argv[2], names), f)
        return 0
    if len(argv) == 7 and argv[1] == "pack":
        with open(argv[6]) as f:
            pack(argv[2], argv[3], argv[4], argv[5], json.load(f))
        return 0
    if len(argv) == 6 and argv[1] in ("check", "unpack") and argv[5] in ("suite", "cli"):
        if argv[1] == "unpack":
            return unpack(argv[2], argv[3], argv[4], argv[5])
        tar = open_checked(argv[2], argv[3], argv[4], argv[5])
        if tar is None:
            return 1
        tar.close()
        return 0
    if len(argv) >= 5 and argv[1] == "carry-plan":
        archives = [(a.rsplit("=", 1)[0], int(a.rsplit("=", 1)[1])) for a in argv[5:]]
        plan = carry_plan(int(argv[2]), int(argv[3]), int(argv[4]), archives)
        if plan is None:
            print("prebuilt: an archive does not fit one call with the tree", file=sys.stderr)
            return 1
        for names in plan:
            print(" ".join(names))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
