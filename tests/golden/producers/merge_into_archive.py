#!/usr/bin/env python3
"""Merges a golden fragment (pack_flavor_golden.py's DEST_DIR, run_h100_judge.py's OUT_DIR) into the
golden archive: its files are added, manifest cases of the same kinds are replaced by the
fragment's (or, with --append, kept and the fragment's added after them), and the README gets the
fragment's README.md section (replacing an earlier copy of it). Deterministic output (sorted
members, mtime 0, uid/gid 0). numpy not needed.

usage: merge_into_archive.py ARCHIVE.tar.xz FRAGMENT_DIR [--append] [--out-dir DIR]
  --append   keep the archive's cases of the fragment's kinds; a file name the archive already
             holds is refused
  --out-dir  also leave the merged tree in DIR (for NVFP4_GOLDEN_DIR)

The fragment's cases are read from manifest_fragment.json (a list), or from manifest.json's
"cases"; a case may name files in nested step lists (linear_fp8_delayed_h100's "steps").
"""
import io
import json
import lzma
import os
import shutil
import sys
import tarfile
import tempfile


def main(argv):
    archive, fragment = argv[0], argv[1]
    out_dir = argv[argv.index("--out-dir") + 1] if "--out-dir" in argv else None
    append = "--append" in argv
    work = tempfile.mkdtemp()
    with tarfile.open(archive, "r:xz") as t:
        t.extractall(work)
    fragment_list = os.path.join(fragment, "manifest_fragment.json")
    if os.path.exists(fragment_list):
        frag_cases = json.load(open(fragment_list))
    else:
        frag_cases = json.load(open(os.path.join(fragment, "manifest.json")))["cases"]
    kinds = {c["kind"] for c in frag_cases}
    manifest = json.load(open(os.path.join(work, "manifest.json")))
    kept = manifest["cases"] if append else [c for c in manifest["cases"] if c["kind"] not in kinds]
    manifest["cases"] = kept + frag_cases
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    # The files the fragment's cases name (or, for a fragment without them, every data file in it).
    names = set()

    def collect(value):
        if isinstance(value, str) and value.endswith((".npy", ".safetensors")):
            names.add(value)
        elif isinstance(value, list):
            for v in value:
                collect(v)
        elif isinstance(value, dict):
            for v in value.values():
                collect(v)
    collect(frag_cases)
    for name in sorted(names):
        source = os.path.join(fragment, name)
        if not os.path.exists(source):
            if os.path.exists(os.path.join(work, name)) and not append:
                continue  # already in the archive (a case whose fields changed, not its files)
            sys.exit(f"{name}: named by the fragment, in neither the fragment nor the archive")
        if append and os.path.exists(os.path.join(work, name)):
            sys.exit(f"{name}: the archive already holds a file of this name")
        shutil.copy(source, os.path.join(work, name))
    section_path = os.path.join(fragment, "README.md")
    if os.path.exists(section_path):
        section = open(section_path).read().strip() + "\n"
        # The earlier copy: the section whose heading reads the same up to its list of kinds
        # (the list grows), up to the next heading of its level.
        marker = section.splitlines()[0].split(" (kinds")[0]
        readme = open(os.path.join(work, "README.md")).read()
        if marker in readme:
            begin = readme.index(marker)
            end = readme.find("\n## ", begin + len(marker))
            rest = "" if end < 0 else readme[end:].strip() + "\n"
            readme = readme[:begin].rstrip() + "\n\n" + rest
        open(os.path.join(work, "README.md"), "w").write(readme.rstrip() + "\n\n" + section)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name in ["./"] + sorted("./" + n for n in os.listdir(work)):
            path = os.path.join(work, name)
            info = t.gettarinfo(path, arcname=name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if info.isfile():
                with open(path, "rb") as f:
                    t.addfile(info, f)
            else:
                t.addfile(info)
    with open(archive, "wb") as f:
        f.write(lzma.compress(buf.getvalue(), preset=9 | lzma.PRESET_EXTREME))
    if out_dir:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.copytree(work, out_dir)
    shutil.rmtree(work)


if __name__ == "__main__":
    main(sys.argv[1:])
