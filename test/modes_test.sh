#!/usr/bin/env bash
# Every option, in every action, is honoured or refused: never ignored. Run by
# test/run_tests.sh (or directly: bash test/modes_test.sh), from the repository root, after
# make and make data.
#
# The table below has a row per (program, action, option) cell, and says which it must be:
#   honoured  the run exits 0, and its output (stdout and stderr, with the numbers that
#             measure time masked) differs from the same run without the option: the
#             option had an effect that can be seen;
#   refused   exit 1, stdout empty, and stderr one line naming the option and the action
#             ("-p has no effect with --selftest ...; drop -p").
# The actions: a speculative run (run), --trace, --compare, --plain and --selftest. The
# generation runs are short (-n 20). The self-test cells cost a self-test each, so the
# table keeps one honoured cell per option a self-test reads (-m, -i, --draft PATH and
# --ffn-width). test/bad_inputs.txt holds the same refusals as one-line cases; this table
# is the grid, with the honoured cells beside them.
#
# Output protocol: one PASS/FAIL line per cell; exit 1 if any failed.
#
# The quick tier (TEST_TIER=quick, make test) leaves the honoured self-test cells to the full
# tier (make check): each runs two whole self-tests, 90 of this test's 94 s of CPU.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (sanitizer builds): the refused cells are bad_inputs.txt
    # rows, which cli_test.sh runs sanitized; the honoured ones are whole runs, checked here once
    echo "PASS modes: checked in the first pass (the refusals run sanitized in cli_test.sh)"
    exit 0
fi

[[ ${TEST_TIER:-full} == quick ]] && echo "note: the quick tier leaves the honoured --selftest cells to make check"
SPECDEC=${SPECDEC_BIN:-./specdec}
BEYOND=${BEYOND_BIN:-./beyond}
T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_modes.XXXXXX") || { echo "FAIL modes: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT
nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

# Files an honoured cell reads: another model (a random one), another corpus (the same text
# with its two halves swapped: another training split, so another bigram table and other
# self-test prompts) and another GPT draft (the random model: the same vocabulary and window).
tinyshakespeare/train init --seed 1337 -o "$T/random.bin" 2>/dev/null ||
    fail "modes: tinyshakespeare/train init --seed 1337 failed (run make first)"
half=$(($(wc -c <tinyshakespeare/input.txt) / 2))
{ tail -c +$((half + 1)) tinyshakespeare/input.txt; head -c "$half" tinyshakespeare/input.txt; } >"$T/swapped.txt"

# mask: the numbers that measure time become N (every decimal, and "N tokens/s"), so that
# two runs of one command print the same
mask() {
    sed -E -e 's/[0-9]+\.[0-9]+/N/g' -e 's/[0-9]+ tokens\/s/N tokens\/s/g'
}

# run PROGRAM ARGS...: runs it, its output masked in $T/out (stdout, then stderr), its exit
# code in rc, its stderr in $T/err and its stdout in $T/stdout
run() {
    timeout 300 "$@" >"$T/stdout" 2>"$T/err" </dev/null
    rc=$?
    cat "$T/stdout" "$T/err" | mask >"$T/out"
}

# cell PROGRAM ACTION EXPECT OPTION...: one cell of the grid (ACTION "run" adds no flag)
cell() {
    local prog=$1 action=$2 expect=$3
    shift 3
    local bin=$SPECDEC flags=()
    [[ $prog == beyond ]] && bin=$BEYOND
    [[ $action != run ]] && flags=("$action")
    [[ $action != --selftest ]] && flags+=(-n 20)
    local what="./$prog ${flags[*]} $*"
    [[ ${TEST_TIER:-full} == quick && $action == --selftest && $expect == honoured ]] && return
    if [[ $expect == refused ]]; then
        run "$bin" "${flags[@]}" "$@"
        local lines
        lines=$(wc -l <"$T/err")
        if [[ $rc == 1 && ! -s $T/stdout && $lines == 1 ]] && grep -q -- "$1 has no effect with $action\|--selftest runs every draft" "$T/err"; then
            pass "modes: $what: refused ($(head -c 90 "$T/err")...)"
        else
            fail "modes: $what: expected one line refusing $1 and exit 1; exit $rc, stderr: $(head -n 2 "$T/err" | tr '\n' '|' | cut -c 1-200)"
        fi
        return
    fi
    run "$bin" "${flags[@]}"
    local base_rc=$rc
    mv "$T/out" "$T/base"
    run "$bin" "${flags[@]}" "$@"
    if [[ $base_rc == 0 && $rc == 0 ]] && ! cmp -s "$T/base" "$T/out"; then
        pass "modes: $what: honoured (its output differs from the run without $1)"
    else
        fail "modes: $what: expected exit 0 and an effect; exit $base_rc without it, $rc with it, output $(cmp -s "$T/base" "$T/out" && echo "the same" || echo "different"); stderr: $(head -n 1 "$T/err" | cut -c 1-200)"
    fi
}

# The options every action of both programs shares: honoured in the generation runs (but -k
# and -i in --plain, which drafts nothing: -i's corpus is the bigram's), only -m and -i in
# the self-test.
for prog in specdec beyond; do
    for action in run --trace --compare --plain; do
        cell $prog $action honoured -m "$T/random.bin"
        if [[ $action == --plain ]]; then # plain decoding drafts nothing: no bigram to count
            cell $prog $action refused -i "$T/swapped.txt"
        else
            cell $prog $action honoured -i "$T/swapped.txt"
        fi
        cell $prog $action honoured -p "ROMEO:"
        cell $prog $action honoured -n 25
        cell $prog $action honoured -t 0
        cell $prog $action honoured -s 7
        cell $prog $action honoured --no-prompt
        if [[ $action == --plain ]]; then
            cell $prog $action refused -k 3
        else
            cell $prog $action honoured -k 3
        fi
    done
    cell $prog --selftest honoured -m "$T/random.bin"
    cell $prog --selftest honoured -i "$T/swapped.txt"
    for opt in "-p ROMEO:" "-n 25" "-t 0" "-s 7" --no-prompt "-k 3"; do
        cell $prog --selftest refused $opt
    done
done

# The options ./beyond adds.
for action in run --trace --compare; do
    cell beyond $action honoured --draft gpt
    cell beyond $action honoured --tree 2,2
    cell beyond $action honoured --top-k 5
    cell beyond $action honoured --top-p 0.5
    cell beyond $action honoured --draft-p-min 0.3
    cell beyond $action honoured --ffn-width 512
    cell beyond $action honoured --color
done
# --no-color is the default off a terminal: it is seen after --color, which it overrides
# (an option given twice, or two that set one thing, keep the last)
run "$BEYOND" -n 20 --color --no-color
if [[ $rc == 0 ]] && ! grep -q $'\033' "$T/stdout" && run "$BEYOND" -n 20 --color && grep -q $'\033' "$T/stdout"; then
    pass "modes: ./beyond -n 20 --color --no-color: honoured (no colour, where --color alone colours)"
else
    fail "modes: ./beyond -n 20 --color --no-color: expected plain text, and colour from --color alone"
fi
cell beyond --plain honoured --top-k 5
cell beyond --plain honoured --top-p 0.5
cell beyond --plain honoured --ffn-width 512
cell beyond --plain honoured --color
for opt in "--draft gpt" "--tree 2,2" "--draft-p-min 0.3"; do
    cell beyond --plain refused $opt
done
cell beyond --selftest honoured --draft "$T/random.bin" # its gpt and cascade cases read it
cell beyond --selftest honoured --ffn-width 512
for opt in "--draft medusa" "--tree 2,2" "--top-k 5" "--top-p 0.5" "--draft-p-min 0.3" --color --no-color; do
    cell beyond --selftest refused $opt
done

((nfail == 0)) || exit 1
exit 0
