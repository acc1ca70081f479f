#!/usr/bin/env bash
# A checkpoint that loads and then overflows, run by ./specdec and ./beyond from the command
# line (issue 35), as a user would meet it. Run by test/run_tests.sh, against ./specdec and
# ./beyond and again against their sanitizer builds (SPECDEC_BIN, BEYOND_BIN), or directly:
# bash test/nonfinite_test.sh. test/test_nonfinite.c checks the same in-process, for every
# draft and its crafted file; this checks what the programs print and how they exit.
#
# The files: tinyshakespeare/model.bin and draft.bin with row 12 of their position
# embedding at FLT_MAX, written again by the project's own reader and writer
# (read_checkpoint, save_checkpoint: a helper compiled here includes tinyshakespeare/train.c),
# so that each passes every load check. Each case runs with -p ROMEO: (6 characters) and
# asserts:
#   - the exit status is 1, and no sanitizer wrote a report;
#   - stderr's last line is the refusal, naming the file, position 12 (the gpt draft's: 12 or
#     13) and the output token it was to decide, 12 - 6 + 2 = 8 (the draft's: its position
#     - 4), and it is the only line starting with the program's name ("specdec: ", "beyond: ");
#   - stdout is the prompt and whole tokens only, no newline after them: a prefix of the same
#     command's stdout on the shipped files (positions before 12 are theirs, bit for bit),
#     holding at most 7 tokens after the prompt (8 - 1).
# A prompt of 13 characters puts position 12 in the prefill's own row: token 1, and stdout
# is the prompt alone. One PASS/FAIL line per case; exit 1 if any failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

BIN=${SPECDEC_BIN:-./specdec}  # run_tests.sh also passes a sanitizer build
BEYOND=${BEYOND_BIN:-./beyond} # and of beyond.c
CC=${CC:-gcc}

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

for f in "$BIN" "$BEYOND"; do
    [[ -x $f ]] || { fail "nonfinite: $f is missing (run make)"; exit 1; }
done
T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_nonfinite.XXXXXX") || { echo "FAIL nonfinite: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT

# The helper: reads a checkpoint, sets row ROW of its position embedding to FLT_MAX, saves it.
cat >"$T/craft.c" <<CSRC
#define TESTING
#include "$PWD/tinyshakespeare/train.c"
#include <float.h>
// craft IN ROW OUT: IN with row ROW of its position embedding at FLT_MAX, saved to OUT.
int main(int argc, char **argv) {
    GPT g = {0};
    Vocab v;
    char err[512] = "";
    int ok = argc == 4 && read_checkpoint(argv[1], (FileRole){"checkpoint", "-"}, &g, &v, err,
                                          sizeof(err)) == 0;
    for (int i = 0; ok && i < g.config.n_embd; i++) // one row, n_embd floats
        g.w.position_embedding[(size_t)atoi(argv[2]) * g.config.n_embd + i] = FLT_MAX;
    ok = ok && save_checkpoint(&g, &v, argv[3], err, sizeof(err)) == 0;
    if (!ok) fprintf(stderr, "craft: %s\n", err);
    free_gpt(&g);
    return !ok;
}
CSRC
if ! "$CC" -std=c11 -O1 -ffp-contract=off -o "$T/craft" "$T/craft.c" -lm 2>"$T/cc_err"; then
    fail "nonfinite: $CC cannot build the crafting helper: $(head -n 3 "$T/cc_err" | tr '\n' '|')"
    exit 1
fi
MODEL=$T/model_overflow.bin
DRAFT=$T/draft_overflow.bin
"$T/craft" tinyshakespeare/model.bin 12 "$MODEL" && "$T/craft" tinyshakespeare/draft.bin 12 "$DRAFT" ||
    { fail "nonfinite: the crafting helper failed"; exit 1; }

# case LABEL FILE POS_LO POS_HI PROMPT PROGRAM ARGS...: runs PROGRAM -p PROMPT ARGS with the
# crafted files (-m "$MODEL" unless ARGS name a draft file instead), and the same with the
# shipped ones, and checks the stop. FILE is the path the refusal must name.
case_() {
    local label=$1 file=$2 lo=$3 hi=$4 prompt=$5 prog=$6
    shift 6
    local crafted=() shipped=() a
    for a in "$@"; do # the crafted draft's path stands for the shipped draft in the reference
        crafted+=("$a")
        [[ $a == "$DRAFT" ]] && a=tinyshakespeare/draft.bin
        shipped+=("$a")
    done
    [[ $file == "$MODEL" ]] && crafted+=(-m "$MODEL")
    "$prog" -p "$prompt" -n 40 "${crafted[@]}" >"$T/out" 2>"$T/err"
    local rc=$?
    "$prog" -p "$prompt" -n 40 "${shipped[@]}" >"$T/ref" 2>"$T/ref_err"
    local ref_rc=$? np=${#prompt} why=""
    local last pos tok out_bytes ref_bytes
    last=$(tail -n 1 "$T/err")
    pos=$(sed -n 's/.* gives a non-finite logit at position \([0-9]*\) (token [0-9]* of the output).*/\1/p' <<<"$last")
    tok=$(sed -n 's/.* gives a non-finite logit at position [0-9]* (token \([0-9]*\) of the output).*/\1/p' <<<"$last")
    out_bytes=$(wc -c <"$T/out")
    ref_bytes=$(wc -c <"$T/ref")
    [[ $rc == 1 ]] || why+=" exit status $rc;"
    [[ $ref_rc == 0 ]] || why+=" the reference run exited $ref_rc;"
    grep -qE 'Sanitizer|runtime error' "$T/err" && why+=" a sanitizer report;"
    local name=specdec # the program's own name starts its messages
    [[ $prog == "$BEYOND" ]] && name=beyond
    [[ $last == "$name: $file gives a non-finite logit at position "*"retrain it or use another" ]] ||
        why+=" the last stderr line is not the refusal for $file: '$last';"
    [[ $(grep -c "^$name: " "$T/err") == 1 ]] || why+=" not exactly one '$name: ' line;"
    [[ -n $pos && $pos -ge $lo && $pos -le $hi && $tok == $((pos - np + 2)) ]] ||
        why+=" position '$pos' (want $lo..$hi), token '$tok' (want position - $np + 2);"
    cmp -s "$T/out" <(head -c "$out_bytes" "$T/ref") || why+=" stdout is not a prefix of the reference's;"
    ((out_bytes < ref_bytes)) || why+=" stdout is not shorter than the reference's;"
    [[ $(tail -c 1 "$T/out" | od -An -c | tr -d ' ') != '\n' ]] || why+=" stdout ends in a newline;"
    # the text after the prompt: whole characters, fewer than the token the row was to decide
    local made=$((out_bytes - np))
    [[ " $* " == *" --color "* ]] || ((made >= 0 && made <= tok - 1)) ||
        why+=" $made characters after the prompt (at most $((tok - 1)));"
    if [[ -z $why ]]; then
        pass "nonfinite: $label: exit 1, '$(sed 's/^\([a-z]*\): [^ ]*/\1: FILE/; s/: its weights.*//' <<<"$last")', and $made bytes after the prompt, a prefix of the shipped files' text"
    else
        fail "nonfinite: $label:$why"
    fi
}

R=ROMEO:
LONG="To be or not " # 13 characters: position 12 is the prefill's last row
case_ "./specdec, a chain with the bigram" "$MODEL" 12 12 "$R" "$BIN"
case_ "./specdec -t 0" "$MODEL" 12 12 "$R" "$BIN" -t 0
case_ "./specdec --plain" "$MODEL" 12 12 "$R" "$BIN" --plain
case_ "./specdec --compare -t 0" "$MODEL" 12 12 "$R" "$BIN" --compare -t 0
case_ "./specdec --trace" "$MODEL" 12 12 "$R" "$BIN" --trace
case_ "./specdec, the prefill's row" "$MODEL" 12 12 "$LONG" "$BIN"
case_ "./specdec --plain, the prefill's row" "$MODEL" 12 12 "$LONG" "$BIN" --plain
case_ "./beyond, a chain with the bigram" "$MODEL" 12 12 "$R" "$BEYOND"
case_ "./beyond --top-k 5" "$MODEL" 12 12 "$R" "$BEYOND" --top-k 5
case_ "./beyond --top-p 0.9" "$MODEL" 12 12 "$R" "$BEYOND" --top-p 0.9
case_ "./beyond -t 0.8 --top-k 3 --top-p 0.8" "$MODEL" 12 12 "$R" "$BEYOND" -t 0.8 --top-k 3 --top-p 0.8
case_ "./beyond --tree 3,2,1,1 --top-k 5" "$MODEL" 12 12 "$R" "$BEYOND" --tree 3,2,1,1 --top-k 5
case_ "./beyond --draft gpt --top-p 0.9" "$MODEL" 12 12 "$R" "$BEYOND" --draft gpt --top-p 0.9
case_ "./beyond --draft lookup" "$MODEL" 12 12 "$R" "$BEYOND" --draft lookup
case_ "./beyond --draft cascade --top-k 5" "$MODEL" 12 12 "$R" "$BEYOND" --draft cascade --top-k 5
case_ "./beyond --draft early-exit-untrained -t 0" "$MODEL" 12 12 "$R" "$BEYOND" --draft early-exit-untrained -t 0
case_ "./beyond --plain --top-k 5" "$MODEL" 12 12 "$R" "$BEYOND" --plain --top-k 5
case_ "./beyond --compare --tree 2,2" "$MODEL" 12 12 "$R" "$BEYOND" --compare --tree 2,2
case_ "./beyond --color --tree 2,2" "$MODEL" 12 12 "$R" "$BEYOND" --color --tree 2,2
case_ "./beyond --top-k 5, the prefill's row" "$MODEL" 12 12 "$LONG" "$BEYOND" --top-k 5
case_ "./beyond --draft DRAFT (crafted)" "$DRAFT" 12 13 "$R" "$BEYOND" --draft "$DRAFT"
case_ "./beyond --draft DRAFT -t 0" "$DRAFT" 12 13 "$R" "$BEYOND" --draft "$DRAFT" -t 0
case_ "./beyond --draft DRAFT --tree 3,2,1,1 --top-k 5" "$DRAFT" 12 13 "$R" "$BEYOND" --draft "$DRAFT" --tree 3,2,1,1 --top-k 5
case_ "./beyond --draft DRAFT --top-p 0.9 --draft-p-min 0.2" "$DRAFT" 12 13 "$R" "$BEYOND" --draft "$DRAFT" --top-p 0.9 --draft-p-min 0.2
exit $((nfail > 0))
