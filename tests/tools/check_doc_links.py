#!/usr/bin/env python3
"""Every relative link of the project's Markdown (README.md and docs/**.md, or the installed copies
under a doc directory) names a file that exists there, and every #anchor a heading of that file.
Usage: check_doc_links.py ROOT   (ROOT holds README.md and docs/: the source tree, or
<prefix>/share/doc/nvfp4 after `cmake --install`). Exit 1 listing each dead link."""
import pathlib
import re
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    out = set()
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        text = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        out.add(text)
    return out


def main(root):
    root = pathlib.Path(root).resolve()
    files = [root / "README.md"] + sorted((root / "docs").rglob("*.md"))
    missing = [f for f in files if not f.is_file()]
    if missing or len(files) < 2:
        print(f"{root}: no README.md and docs/*.md here ({', '.join(map(str, missing))})")
        return 1
    dead = []
    for f in files:
        text = re.sub(r"```.*?```", "", f.read_text(encoding="utf-8"), flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            path, _, anchor = target.partition("#")
            dest = (f.parent / path).resolve() if path else f
            if not dest.exists():
                dead.append(f"{f.relative_to(root)}: {target} (no {dest})")
            elif not str(dest).startswith(str(root)):
                dead.append(f"{f.relative_to(root)}: {target} leaves {root}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                dead.append(f"{f.relative_to(root)}: {target} (no heading #{anchor} in {dest.name})")
    for d in dead:
        print(d)
    print(f"{len(files)} files, {len(dead)} dead links")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
