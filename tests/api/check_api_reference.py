#!/usr/bin/env python3
"""Checks that docs/api.md documents every public name of every public header.

Run by ctest (test `api_reference_complete`) and by hand:
    python3 tests/api/check_api_reference.py [--list include/nvfp4/x.hpp]

A public header is any include/nvfp4/**/*.hpp outside the `detail/` and `simd/` folders. Its public
names are those declared at namespace scope (types, functions, variables, concepts, aliases) in a
namespace that docs/api.md lists as public (the line starting `Public namespaces:`); names in
internal namespaces (detail, simd, anything *_detail or detail_*) are skipped. A namespace
that is neither listed nor internal is an error, so a new namespace gets classified.

docs/api.md must have one section per header, a heading containing the header's path in a code
span (e.g. "### `nvfp4/scaling/quantize.hpp`"), and every public name of that header must appear
in a code span inside that section (`quantize`, `nvfp4::quantize<F>(view)`, ... all count).
Members of classes are documented in the class's entry but not checked here.
"""
import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
INTERNAL_NAMESPACE = re.compile(r"^(detail|simd|avx2|avx512|panels|internal)$|_detail$|^detail_")
KEYWORDS_BEFORE_PAREN = {
    "requires", "decltype", "noexcept", "alignas", "sizeof", "alignof", "static_assert", "explicit",
    "__attribute__", "operator", "if", "return",
}


def strip_comments_and_literals(text):
    """Removes comments, string/char literals and preprocessor lines, keeping line structure."""
    out = []
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        c = text[i]
        if at_line_start and c == "#":
            # preprocessor directive, with continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    i += 2
                    out.append("\n")
                    continue
                i += 1
            continue
        if c in " \t":
            out.append(c)
            i += 1
            continue
        if c == "\n":
            out.append(c)
            at_line_start = True
            i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if raw:
            end = text.find(")" + raw.group(1) + '"', i)
            end = n if end < 0 else end + len(raw.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, end))
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def split_top_level(text):
    """Yields (namespace, declaration head, line) for each statement at namespace scope."""
    stack = []  # entries: ("ns", name) or ("block", None)
    head = []
    head_line = 1
    line = 1
    paren = 0
    i, n = 0, len(text)

    def namespace_path():
        return "::".join(name for kind, name in stack if kind == "ns")

    def at_namespace_scope():
        return all(kind == "ns" for kind, _ in stack)

    started = False
    depths = []  # how many stack entries each open namespace brace pushed
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
        if not at_namespace_scope():
            if c == "{":
                stack.append(("block", None))
            elif c == "}":
                stack.pop()
            i += 1
            continue
        if c in "([":
            paren += 1
        elif c in ")]":
            paren -= 1
        if paren > 0 or c not in "{};":
            if not started and not c.isspace():
                head_line, started = line, True
            head.append(c)
            i += 1
            continue
        # object-like macros standing alone (NVFP4_BEGIN_INTRINSIC_CODE) are no part of a declaration
        statement = re.sub(r"^(\s*\b[A-Z][A-Z0-9_]*\b(?!\s*\())*", "", "".join(head)).strip()
        head, started = [], False
        if c == "{":
            ns = re.match(r"^(inline\s+)?namespace\s*([\w:]*)\s*$", statement)
            if ns:
                parts = ns.group(2).split("::") if ns.group(2) else ["(anonymous)"]
                stack.extend(("ns", part) for part in parts)
                depths.append(len(parts))
            elif re.match(r'^extern\s*""$', statement):
                depths.append(0)
            else:
                if statement:
                    yield namespace_path(), statement, head_line
                stack.append(("block", None))
        elif c == "}":
            if statement:
                yield namespace_path(), statement, head_line
            for _ in range(depths.pop() if depths else 0):
                stack.pop()
        elif statement:  # ';'
            yield namespace_path(), statement, head_line
        i += 1


def strip_angle_groups(s):
    """Removes balanced <...> groups (template arguments)."""
    out, depth = [], 0
    for c in s:
        if c == "<":
            depth += 1
        elif c == ">" and depth > 0:
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def strip_template_prefix(s):
    while True:
        m = re.match(r"^\s*template\s*<", s)
        if not m:
            return s
        depth, i = 1, m.end()
        while i < len(s) and depth:
            depth += {"<": 1, ">": -1}.get(s[i], 0)
            i += 1
        s = s[i:]


def declared_names(statement):
    """The names a namespace-scope declaration introduces (empty for what is not one)."""
    s = " ".join(statement.split())
    s = strip_template_prefix(s)
    s = re.sub(r"\[\[[^\]]*\]\]", " ", s).strip()
    if not s or s.startswith(("static_assert", "using namespace", "friend", "extern template")):
        return []
    m = re.match(r"^namespace\s+\w+\s*=", s)
    if m:
        return []
    m = re.match(r"^using\s+(\w+)\s*=", s)
    if m:
        return [m.group(1)]
    m = re.match(r"^using\s+[\w:]*::(\w+)$", s)
    if m:
        return [m.group(1)]
    m = re.match(r"^concept\s+(\w+)", s)
    if m:
        return [m.group(1)]
    m = re.match(r"^enum(\s+class|\s+struct)?\s+(\w+)", s)
    if m:
        return [m.group(2)]
    m = re.match(r"^(struct|class|union)\s+(alignas\s*\([^)]*\)\s*)?(\w+)", s)
    if m and not re.match(r"^(struct|class|union)\s+(alignas\s*\([^)]*\)\s*)?\w+\s*(<[^=]*>)?\s*\w+\s*[=({;]", s + ";"):
        return [m.group(3)]
    # a requires clause between the template head and the declaration
    if s.startswith("requires"):
        s = drop_requires_clause(s)
    flat = strip_angle_groups(s)
    # variable: '=' or '{' initializer before any '('
    eq = re.search(r"=", flat)
    par = re.search(r"\(", flat)
    if eq and (not par or eq.start() < par.start()):
        names = re.findall(r"(\w+)\s*(\[[^\]]*\])?\s*$", flat[:eq.start()])
        return [n[0] for n in names if is_name(n[0])]
    # function: the identifier before the first '(' that is not a keyword or operator
    for m in re.finditer(r"([\w~]+)\s*\(", flat):
        name = m.group(1)
        before = flat[:m.start()].rstrip()
        if before.endswith("::"):
            return []  # an out-of-class definition of a member (Class::member), documented with its class
        if before.endswith("operator") or name in KEYWORDS_BEFORE_PAREN:
            continue
        if "operator" in flat[:m.start() + len(name)].split()[-1:]:
            continue
        return [name] if is_name(name) else []
    # plain variable declaration without initializer
    m = re.search(r"(\w+)\s*$", flat)
    if m and len(flat.split()) >= 2 and is_name(m.group(1)):
        return [m.group(1)]
    return []


def drop_requires_clause(s):
    """Drops `requires <constraint>` up to the start of the declaration proper."""
    i = len("requires")
    depth_angle = depth_paren = 0
    tokens = re.finditer(r"\(|\)|<|>|&&|\|\||[\w:]+|\S", s[i:])
    expect_operand = True
    for t in tokens:
        tok = t.group(0)
        if tok == "(":
            depth_paren += 1
        elif tok == ")":
            depth_paren -= 1
        elif depth_paren == 0 and tok == "<":
            depth_angle += 1
        elif depth_paren == 0 and tok == ">":
            depth_angle -= 1
        elif depth_paren == 0 and depth_angle == 0:
            if tok in ("&&", "||", "!"):
                expect_operand = True
                continue
            if re.match(r"^[\w:]+$", tok):
                if not expect_operand:
                    return s[i + t.start():]
                expect_operand = False
                continue
        if depth_paren == 0 and depth_angle == 0 and tok in (")", ">"):
            expect_operand = False
    return s


def is_name(name):
    if not re.match(r"^[A-Za-z_]\w*$", name) or name.startswith("_"):
        return False
    if name.isupper():  # macros
        return False
    return name not in {"const", "constexpr", "inline", "static", "void", "auto", "return"}


def public_namespaces(api_text):
    m = re.search(r"^Public namespaces:(.*)$", api_text, re.M)
    if not m:
        return None
    return set(re.findall(r"`([\w:]+)`", m.group(1)))


def header_names(path, public):
    """{name: line} of the public names of one header, and a list of problems."""
    text = strip_comments_and_literals(path.read_text())
    names, problems = {}, []
    for namespace, statement, line in split_top_level(text):
        if not namespace:
            continue  # global namespace: macros' helpers, nothing of ours
        parts = namespace.split("::")
        if parts[0] != "nvfp4" or any(p is None or INTERNAL_NAMESPACE.search(p) or p == "(anonymous)" for p in parts):
            continue
        if namespace not in public:
            problem = (f"{path.relative_to(ROOT)}:{line}: namespace `{namespace}` is neither listed on the "
                       f"'Public namespaces:' line of docs/api.md nor internal (detail, simd, *_detail)")
            if not any(f"namespace `{namespace}`" in p for p in problems):
                problems.append(problem)
            continue
        for name in declared_names(statement):
            names.setdefault(name, line)
    return names, problems


def public_headers():
    base = ROOT / "include" / "nvfp4"
    for p in sorted(base.rglob("*.hpp")):
        rel = p.relative_to(base)
        if any(part in ("detail", "simd") for part in rel.parts[:-1]):
            continue
        yield p


def sections(api_text):
    """{header path: section text} for every heading naming a header in a code span."""
    result = {}
    matches = list(re.finditer(r"^(#+)\s+.*?`(nvfp4/[\w/]+\.hpp)`.*$", api_text, re.M))
    for k, m in enumerate(matches):
        level = len(m.group(1))
        end = len(api_text)
        for later in re.finditer(r"^(#+)\s", api_text[m.end():], re.M):
            if len(later.group(1)) <= level:
                end = m.end() + later.start()
                break
        result[m.group(2)] = api_text[m.end():end]
    return result


def mentioned(name, section):
    for span in re.findall(r"`([^`\n]+)`", section):
        if re.search(r"(?<![\w])" + re.escape(name) + r"(?![\w])", span):
            return True
    return False


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", metavar="HEADER", help="print the public names found in one header and exit")
    parser.add_argument("--api", default=str(ROOT / "docs" / "api.md"))
    args = parser.parse_args()
    api_text = pathlib.Path(args.api).read_text()
    public = public_namespaces(api_text)
    if public is None:
        print("docs/api.md: no line starting 'Public namespaces:'", file=sys.stderr)
        return 1
    if args.list:
        names, problems = header_names(pathlib.Path(args.list).resolve(), public)
        for name, line in sorted(names.items(), key=lambda kv: kv[1]):
            print(f"{line:5d} {name}")
        for p in problems:
            print(p)
        return 0
    documented = sections(api_text)
    failures = []
    total = 0
    for path in public_headers():
        key = str(path.relative_to(ROOT / "include"))
        names, problems = header_names(path, public)
        failures.extend(problems)
        total += len(names)
        if key not in documented:
            if not names:
                continue  # an internal header (nothing public in it); a section is welcome but not required
            failures.append(f"{key}: no section in docs/api.md; add a heading '### `{key}`' with an entry for each of: "
                            + ", ".join(sorted(names)))
            continue
        missing = [n for n in sorted(names) if not mentioned(n, documented[key])]
        if missing:
            failures.append(f"{key}: docs/api.md's section does not mention (in a code span): " + ", ".join(missing))
    stale = sorted(set(documented) - {str(p.relative_to(ROOT / "include")) for p in public_headers()})
    for key in stale:
        failures.append(f"docs/api.md has a section for {key}, which is not a public header (renamed or removed?)")
    if failures:
        print("docs/api.md is incomplete (see 'Adding an entry' at the end of docs/api.md):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"docs/api.md documents all {total} public names of {len(documented)} headers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
