#!/usr/bin/env bash
# Quoted outputs test, run by test/run_tests.sh (or directly: bash test/docs_test.sh).
#
# README.md and notes/*.md quote real output. Every fenced code block whose first line
# is a command of this project is run again here, and its output must match the
# lines quoted under the command:
#   - a block is checked when its first line starts with "./specdec ", "./beyond ",
#     "test/explain", "test/early_exit", "tinyshakespeare/train eval",
#     "tinyshakespeare/train medusa-eval", "tinyshakespeare/train exit-eval" or
#     "tinyshakespeare/train eagle-eval", or is a one-line "for" loop that echoes
#     "$(./specdec ...)" or "$(./beyond ...)" (an optional "$ " before it is dropped); the
#     command runs from the repository root
#     with bash, and both of its streams are compared (a quoted command that wants only one says 2>/dev/null or
#     2>&1 >/dev/null itself);
#   - a quoted line that is just "…" stands for any number of output lines (an
#     elision), and a line that ends in " …" must match the start of an output line;
#   - numbers that measure time are masked on both sides (see mask): the machine's
#     speed is not the text's (the bench's tables, all timings, are quoted without
#     running them);
#   - blocks whose first line is anything else (code, diagrams, a usage synopsis with
#     "[options]") are not run.
# One PASS/FAIL line per block; exit 1 if any failed. DOCS_FILES overrides the files
# (used to show that a stale quote fails).

set -u
export LC_ALL=C # byte semantics for awk and sed: "…" is three bytes everywhere
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (a sanitizer build): the documents are the same
    echo "PASS quoted outputs: checked in the first pass"
    exit 0
fi

nfail=0
nblocks=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_docs.XXXXXX") || { echo "FAIL quoted outputs: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT

# mask: the numbers that measure time become N (stdin to stdout): on the lines that are
# all timing (./specdec's and ./beyond's wall time; ./specdec --compare's c(k+1); ./beyond
# --compare's speedup, its accounting, the papers' formula and c(T); ETA, ms/step) every number; on the rows of
# ./beyond's tables (where the time went, the cost per token: a row named by a kind of
# pass, drafting, the rest or every pass) every decimal, so a row's passes and tokens are still
# compared; elsewhere each number followed by a time unit ("4.1 s", "12.5 ms", "14827
# tokens/s", "20.8 GFLOP/s"), so a loss or a count on the same line is still compared.
# Runs of spaces shrink to one.
mask() {
    sed -E -e '/wall time|speedup|^ *accounting |papers. formula|c\(T\)|c\(k\+1\)|ETA|ms\/step/ { s/[0-9]+(\.[0-9]+)?/N/g; s/ +/ /g; }' \
           -e '/^    (prefill|refill|verify|verify \+ refill|one-token step|drafting|the rest|every pass) / { s/[0-9]+\.[0-9]+%?/N/g; s/ +/ /g; }' \
           -e 's/[0-9]+(\.[0-9]+)? ?(s|ms|us|tokens\/s|GFLOP\/s)([^A-Za-z0-9]|$)/N \2\3/g' \
           -e 's/[[:space:]]+$//'
}

# matches EXPECTED ACTUAL: true if the actual lines match the quoted ones, with "…"
# lines as elisions (first fit) and "X …" lines as prefixes (test/quote_match.awk).
matches() {
    awk -f test/quote_match.awk "$1" "$2"
}

# the seeded random model some notes run (run_tests.sh writes the same file, atomically)
if ! mkdir -p test/build || ! tinyshakespeare/train init --seed 1337 -o test/build/random1337.bin 2>/dev/null; then
    fail "quoted outputs: tinyshakespeare/train init --seed 1337 -o test/build/random1337.bin failed (run make first)"
fi

files=${DOCS_FILES:-README.md notes/*.md}
for f in $files; do
    [[ -f $f ]] || { fail "quoted outputs: $f is missing"; continue; }
    # split the file into blocks: block i's lines go to $T/b.i, starting at line $T/l.i
    rm -f "$T"/b.* "$T"/l.*
    awk -v dir="$T" '
        /^```/ { if (inb) { inb = 0; close(out) } else { inb = 1; i++; out = dir "/b." i; printf "" > out; print NR + 1 > (dir "/l." i); close(dir "/l." i) } next }
        inb { print > out }' "$f"
    for b in "$T"/b.*; do
        [[ -e $b ]] || continue
        cmd=$(head -n 1 "$b")
        cmd=${cmd#\$ }
        case $cmd in
            *" ["*) continue ;; # a synopsis ("./specdec [-m model.bin] ..."), not a command
            "./specdec "* | "./beyond "* | test/explain* | test/early_exit* | \
                "tinyshakespeare/train eval"* | "tinyshakespeare/train medusa-eval"* | \
                "tinyshakespeare/train exit-eval"* | "tinyshakespeare/train eagle-eval"* | \
                "for "*"do echo "*'$(./specdec '* | "for "*"do echo "*'$(./beyond '*) ;;
            *) continue ;;
        esac
        nblocks=$((nblocks + 1))
        line=$(cat "${b/b./l.}")
        tail -n +2 "$b" | mask >"$T/want"
        timeout 600 bash -c "$cmd" </dev/null 2>&1 | mask >"$T/got"
        if matches "$T/want" "$T/got"; then
            pass "quoted outputs: $f:$line: $cmd ($(wc -l <"$T/want") lines as quoted)"
        else
            # the first quoted line that the output does not have, to show what drifted
            first=$(grep -vxF -f "$T/got" "$T/want" | grep -vx '…' | head -n 1)
            fail "quoted outputs: $f:$line: $cmd no longer prints what is quoted (first line not found: '${first:-order or count differs}')"
        fi
    done
done
if ((nblocks == 0)); then
    fail "quoted outputs: no quoted command found in $files"
fi
((nfail == 0)) || exit 1
exit 0
