#!/usr/bin/env bash
# Builds a small English corpus from text every Debian machine already has, for trying
# tetra on real text without a network: the licenses in /usr/share/common-licenses and the
# copyright files, READMEs and changelogs in /usr/share/doc. Files are read in sorted order
# (so the same machine gives the same corpus), control characters other than newlines and
# tabs are dropped, and every 20th document goes to validation, the rest to training.
#
#   bash tools/corpus.sh [DIR] [MAX_MB]     # DIR defaults to corpus/, MAX_MB to 8
#
# writes DIR/train.txt and DIR/val.txt and prints their sizes. CORPUS_LICENSES and
# CORPUS_DOCS name other folders to read (the tests use small ones).
set -euo pipefail
licenses="${CORPUS_LICENSES:-/usr/share/common-licenses}"
docs="${CORPUS_DOCS:-/usr/share/doc}"
out="${1:-corpus}"
max_bytes=$(( ${2:-8} * 1024 * 1024 ))
mkdir -p "$out"
train="$out/train.txt" val="$out/val.txt"
: >"$train.tmp"
: >"$val.tmp"

# One document per line of this list, in sorted order.
{
  find "$licenses" -type f 2>/dev/null | LC_ALL=C sort
  find "$docs" -type f \( -name copyright -o -name 'README*' -o -name 'changelog*' \
    -o -name 'NEWS*' -o -name '*.txt' \) 2>/dev/null | LC_ALL=C sort
} | {
  n=0
  total=0
  while IFS= read -r f; do
    case "$f" in
      *.gz) text=$(zcat -- "$f" 2>/dev/null | head -c 200000 || true) ;;
      *.html | *.pdf | *.png | *.svg | *.bz2 | *.xz) continue ;;
      *) text=$(head -c 200000 -- "$f" 2>/dev/null || true) ;;
    esac
    # Text only: skip what is binary, keep printable characters, newlines and tabs. (A here-
    # string, not a pipe: grep -q stops at the first line, and under pipefail the writer's
    # SIGPIPE would drop every document longer than a pipe's buffer.)
    grep -qI . <<<"$text" 2>/dev/null || continue
    text=$(printf '%s' "$text" | tr -d '\000-\010\013-\037\177')
    [ -n "$text" ] || continue
    if (( n % 20 == 19 )); then dest="$val.tmp"; else dest="$train.tmp"; fi
    printf '%s\n\n' "$text" >>"$dest"
    n=$((n + 1))
    total=$((total + ${#text}))
    (( total < max_bytes )) || break
  done
  echo "corpus: $n documents"
} || true  # the list's writer is cut off (SIGPIPE) when the size limit ends the reading
mv "$train.tmp" "$train"
mv "$val.tmp" "$val"
echo "corpus: $(wc -c <"$train") bytes in $train, $(wc -c <"$val") bytes in $val"
