#!/usr/bin/env python3
"""Merges a golden fragment (pack_flavor_golden.py's DEST_DIR) into the golden archive: its files
are added, manifest cases of the same kinds are replaced by the fragment's, and the README gets the
fragment's README.md section (replacing an earlier copy of it). Deterministic output (sorted
members, mtime 0, uid/gid 0). numpy not needed.

usage: merge_into_archive.py ARCHIVE.tar.xz FRAGMENT_DIR [--out-dir DIR]
  --out-dir  also leave the merged tree in DIR (for NVFP4_GOLDEN_DIR)
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
    work = tempfile.mkdtemp()
    with tarfile.open(archive, "r:xz") as t:
        t.extractall(work)
    frag_cases = json.load(open(os.path.join(fragment, "manifest_fragment.json")))
    kinds = {c["kind"] for c in frag_cases}
    manifest = json.load(open(os.path.join(work, "manifest.json")))
    manifest["cases"] = [c for c in manifest["cases"] if c["kind"] not in kinds] + frag_cases
    with open(os.path.join(work, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    for name in os.listdir(fragment):
        if name.endswith((".npy", ".safetensors")):
            shutil.copy(os.path.join(fragment, name), os.path.join(work, name))
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
