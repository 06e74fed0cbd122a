#!/bin/sh
# The documents' links: every relative link in README.md, docs/*.md,
# tests/README.md, bench/README.md and bench/results/*.md names a file or
# directory that exists, and a link with #anchor names a heading (or an
# <a id>) of the Markdown file it points to, by GitHub's rule for heading
# anchors; every docs/*.md is linked from README.md and every
# bench/results/*.md from bench/README.md. Links inside fenced code blocks
# are not links. First the check runs on a planted tree whose four faults
# it must find (so it can fail), then on the real one.
# usage: tests/docs_links.sh SOURCE_DIR
set -u
src=${1:?usage: docs_links.sh SOURCE_DIR}
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# One pass of awk over the documents: each heading's anchor (GitHub's rule:
# lower case; everything but letters, digits, spaces, '-' and '_' dropped;
# spaces to '-'; -1, -2 ... when repeated) and each <a id>; each link
# outside fenced code. It prints "E TARGET FILE LINK" for every relative
# link (the shell tests that TARGET exists) and "X MESSAGE" for a missing
# anchor in a Markdown file or a docs/*.md the README does not link.
scan() { # README DOCUMENT...
  awk -v readme="$1" '
    function norm(p,   n, i, k, part, out, abs) {
      abs = substr(p, 1, 1) == "/"; n = split(p, part, "/"); k = 0
      for (i = 1; i <= n; i++) {
        if (part[i] == "" || part[i] == ".") continue
        if (part[i] == ".." && k > 0 && out[k] != "..") { k--; continue }
        out[++k] = part[i]
      }
      p = abs ? "" : "."
      for (i = 1; i <= k; i++) p = p "/" out[i]
      return p
    }
    function dir(f) { return f ~ /\// ? substr(f, 1, match(f, /\/[^\/]*$/) - 1) : "." }
    function slug(h) {
      sub(/^#+ +/, "", h); h = tolower(h); gsub(/[^a-z0-9 _-]/, "", h); gsub(/ /, "-", h)
      return h
    }
    function add_anchors(f, line,   fence, h, s, seen) {
      # f read again with getline: the anchors of a target not in the list
      while ((getline line < f) > 0) {
        if (line ~ /^[ ]*(```|~~~)/) { fence = !fence; continue }
        if (fence) continue
        if (line ~ /^#+ /) { h = slug(line); anch[f, (h in seen) ? h "-" seen[h] : h] = 1; seen[h]++ }
        s = line
        while (match(s, /<a id="[^"]*">/)) {
          anch[f, substr(s, RSTART + 7, RLENGTH - 9)] = 1; s = substr(s, RSTART + RLENGTH)
        }
      }
      close(f); read[f] = 1
    }
    FNR == 1 { f = norm(FILENAME); fence = 0; files[f] = 1 }
    /^[ ]*(```|~~~)/ { fence = !fence; next }
    fence { next }
    {
      s = $0
      while (match(s, /\]\([^)# ]*(#[^) ]*)?\)/)) {
        link = substr(s, RSTART + 2, RLENGTH - 3); s = substr(s, RSTART + RLENGTH)
        if (link ~ /^(https?|mailto):/) continue
        path = link; anchor = ""
        if ((i = index(link, "#")) > 0) { path = substr(link, 1, i - 1); anchor = substr(link, i + 1) }
        target = path == "" ? f : norm(dir(f) "/" path)
        print "E\t" target "\t" f "\t" link
        if (f == norm(readme)) linked[target] = 1
        if (f ~ /\/bench\/README\.md$/) listed[target] = 1
        if (anchor != "" && target ~ /\.md$/) want[++nw] = target SUBSEP anchor SUBSEP f SUBSEP link
      }
    }
    END {
      for (i = 1; i <= nw; i++) {
        split(want[i], w, SUBSEP)
        if (!(w[1] in read)) add_anchors(w[1])
        if (!((w[1], w[2]) in anch))
          print "X\t" w[3] ": link \047" w[4] "\047: no heading #" w[2] " in " w[1]
      }
      for (g in files) {
        if (g ~ /\/docs\/[^\/]*\.md$/ && !(g in linked))
          print "X\t" norm(readme) ": does not link " substr(g, match(g, /docs\/[^\/]*$/))
        if (g ~ /\/bench\/results\/[^\/]*\.md$/ && !(g in listed))
          print "X\tbench/README.md: does not list " substr(g, match(g, /results\/[^\/]*$/))
      }
    }' "$@"
}

# Check the tree at ROOT; prints the faults and returns their count.
check_tree() { # ROOT
  total=0
  set -- "$1/README.md" "$1"/docs/*.md "$1/tests/README.md" "$1/bench/README.md" \
         "$1"/bench/results/*.md
  for f in "$@"; do [ -f "$f" ] || { echo "missing document $f"; total=$((total + 1)); }; done
  scan "$@" >"$tmp/scan" 2>&1 || { echo "the scan failed:"; cat "$tmp/scan"; return 99; }
  while IFS="$(printf '\t')" read -r kind a b c; do
    case $kind in
      E) [ -e "$a" ] || { echo "$b: link '$c': no file $a"; total=$((total + 1)); } ;;
      X) echo "$a"; total=$((total + 1)) ;;
    esac
  done <"$tmp/scan"
  return "$total"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# The planted tree: a missing file, a missing heading, a document the
# README does not link, a result bench/README.md does not list; a link
# inside a code block and a good anchor are fine.
mkdir -p "$tmp/tree/docs"
cat >"$tmp/tree/README.md" <<'EOF'
# Planted

See [a](docs/a.md) and [the part](docs/a.md#a-part-with-code).
EOF
cat >"$tmp/tree/docs/a.md" <<'EOF'
# A

## A part, with `code`

[gone](missing.md), [no such part](#nowhere), [up](../README.md#planted).

```
[not a link](nothing.md)
```
EOF
echo '# B' >"$tmp/tree/docs/b.md"
mkdir -p "$tmp/tree/tests" "$tmp/tree/bench/results"
echo '# Tests' >"$tmp/tree/tests/README.md"
echo '# Bench' >"$tmp/tree/bench/README.md"
echo '# A result' >"$tmp/tree/bench/results/2000-01-01-x.md"
check_tree "$tmp/tree" >"$tmp/planted.out"
got=$?
if [ "$got" -eq 4 ] && grep -q "missing.md" "$tmp/planted.out" &&
   grep -q "#nowhere" "$tmp/planted.out" && grep -q "does not link docs/b.md" "$tmp/planted.out" &&
   grep -q "does not list results/2000-01-01-x.md" "$tmp/planted.out"; then
  ok
else
  bad "the planted tree gave $got faults, expected 4:"
  cat "$tmp/planted.out"
fi

# The real tree.
check_tree "$src" >"$tmp/real.out"
got=$?
if [ "$got" -eq 0 ]; then
  ok
else
  bad "$got broken or missing links:"
  cat "$tmp/real.out"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
