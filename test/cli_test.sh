#!/usr/bin/env bash
# Command-line tests for ./specdec. Run by test/run_tests.sh from the repo
# root (or directly: bash test/cli_test.sh). Needs ./specdec (make) and
# tinyshakespeare/input.txt (make data).
#
# Output protocol: one line per check, starting with "PASS " or "FAIL ";
# the script exits 1 if any check failed.
#
# Bad-input cases live in the ERROR_CASES table below, one case per line:
#
#     name | expected exit code | required stderr substring(s) | arguments
#
#   - columns are separated by '|' and trimmed; lines that are blank or
#     start with '#' are ignored;
#   - the substring column is literal text (no shell expansion); several
#     substrings that must all appear are separated by ' && ';
#   - the arguments column is parsed with bash `eval`, so shell quoting
#     works ('ab#c', '' for an empty argument, $'\xc3\xa9' for raw bytes)
#     and $T expands to the temp dir, which holds the files prepared below
#     (good.bin, truncated/corrupted checkpoints, small corpora).
#
# For every case the script asserts: the exit code equals the expected
# one (so never 124 = timeout, 134 = abort, 139 = segfault); stderr
# contains each substring; stderr is exactly one newline-terminated line;
# stdout is empty. Each case prints a single PASS/FAIL line naming every
# assertion that failed. Every invocation runs under `timeout 60`.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

BIN=${SPECDEC_BIN:-./specdec}   # run_tests.sh also passes a sanitizer build
CORPUS=tinyshakespeare/input.txt
PROMPT="To be or not to be, that is the "
PARAMS=209729                       # n_layer=4 n_head=4 n_embd=64 block_size=32 V=65
CKPT_SIZE=$((28 + 65 + 4 * PARAMS + 8)) # header + vocabulary + float32 params + checksum

T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_cli.XXXXXX") || { echo "FAIL cli: mktemp -d failed"; exit 1; }
trap 'chmod -R u+rwx "$T" 2>/dev/null; rm -rf "$T"' EXIT

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
# check NAME CONDITION...: PASS if the command succeeds, else FAIL.
check() {
    local name=$1
    shift
    if "$@"; then pass "$name"; else fail "$name"; fi
}

if [[ ! -x $BIN ]]; then fail "cli: $BIN is missing (run make)"; exit 1; fi
if [[ ! -f $CORPUS ]]; then fail "cli: $CORPUS is missing (run make data)"; exit 1; fi

# run ARGS...: run specdec; sets rc, and writes $T/out and $T/err.
# The subshell's own stderr is dropped so that bash's "Aborted" job notice
# for a crashing child does not clutter the output (the FAIL line says it).
run() {
    (timeout 60 "$BIN" "$@" >"$T/out" 2>"$T/err"; exit $?) 2>/dev/null
    rc=$?
}
# Helpers over the last run's output.
out_has() { grep -qF -- "$1" "$T/out"; }
err_has() { grep -qF -- "$1" "$T/err"; }
size_of() { wc -c <"$1" | tr -d ' '; }
# one_line FILE: exactly one line, ending in a newline.
one_line() {
    [[ $(wc -l <"$1" | tr -d ' ') == 1 && $(tail -c 1 "$1" | od -An -tx1 | tr -d ' ') == 0a ]]
}
# describe: the exit code and the first lines of stderr, for FAIL messages.
describe() {
    local what="exit $rc"
    ((rc == 124)) && what+=" (timed out)"
    ((rc > 128 && rc != 124)) && what+=" (killed by signal $((rc - 128)))"
    printf '%s; stderr: %s' "$what" "$(head -n 3 "$T/err" | tr '\n' '|' | cut -c 1-300)"
}

# run_error_case NAME CODE WANT ARGS...: one bad-input case, one PASS/FAIL line.
run_error_case() {
    local name=$1 code=$2 want=$3 problems=() sub
    shift 3
    run "$@"
    [[ $rc == "$code" ]] || problems+=("exit $rc, expected $code")
    while [[ -n $want ]]; do
        sub=${want%% && *}
        [[ $want == *" && "* ]] && want=${want#* && } || want=
        err_has "$sub" || problems+=("stderr lacks \"$sub\"")
    done
    one_line "$T/err" || problems+=("stderr is $(wc -l <"$T/err" | tr -d ' ') lines, not one")
    [[ -s $T/out ]] && problems+=("stdout is not empty ($(size_of "$T/out") bytes)")
    if ((${#problems[@]} == 0)); then
        pass "error case: $name"
    else
        local IFS=';'
        fail "error case: $name: ${problems[*]} -- $(describe)"
    fi
}

# ---------------------------------------------------------------------------
# Files the table refers to

run --init 7 --save "$T/good.bin"
check "--init 7 --save writes a checkpoint (exit 0, $CKPT_SIZE bytes, magic SPDC, empty stdout, 'wrote' on stderr)" \
    eval '[[ $rc == 0 && -f $T/good.bin && $(size_of "$T/good.bin") == "$CKPT_SIZE" &&
             $(head -c 4 "$T/good.bin") == SPDC && ! -s $T/out ]] && err_has "wrote $T/good.bin"'

mkdir "$T/dir"
: >"$T/empty"
printf 'a' >"$T/one_byte"
printf 'To be, or not to be\n' >"$T/short_corpus"  # 20 bytes: too short for --selftest
printf 'hello#world\nhello world\n' >"$T/hash_corpus"   # '#' at offset 5
G=$T/good.bin
head -c 0 "$G" >"$T/ck_empty"
head -c 3 "$G" >"$T/ck_3"
head -c 27 "$G" >"$T/ck_27"
head -c $((28 + 65 - 1)) "$G" >"$T/ck_midvocab"
head -c $((CKPT_SIZE / 2)) "$G" >"$T/ck_midparams"
head -c $((CKPT_SIZE - 1)) "$G" >"$T/ck_minus1"
# patch FILE OFFSET BYTES: overwrite bytes in place.
patch() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
cp "$G" "$T/ck_magic";   patch "$T/ck_magic" 0 'SPDX'
cp "$G" "$T/ck_version"; patch "$T/ck_version" 4 '\002'
cp "$G" "$T/ck_nlayer";  patch "$T/ck_nlayer" 8 '\003'
cp "$G" "$T/ck_flip"
mid=$((CKPT_SIZE / 2))
b=$(od -An -tu1 -j "$mid" -N 1 "$G" | tr -d ' ')
patch "$T/ck_flip" "$mid" "$(printf '\\%03o' $((b ^ 0xff)))"
# A NaN parameter under a correct checksum, so the finiteness check is reached.
python3 - "$G" "$T/ck_nan" <<'EOF'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[28 + 65:28 + 65 + 4] = struct.pack('<I', 0x7fc00000)   # first parameter := NaN
h = 0xcbf29ce484222325
for x in b[:-8]:
    h = ((h ^ x) * 0x100000001b3) & 0xffffffffffffffff
b[-8:] = struct.pack('<Q', h)
open(sys.argv[2], 'wb').write(b)
EOF

# A tiny model trained 12 steps, with its training state, and broken copies of the pair.
TINY=(--layers 1 --heads 2 --embd 8 --block 8 --batch 2)
run train "${TINY[@]}" --iters 12 -o "$T/tiny.bin"
check "train of a tiny model writes the checkpoint and its .state (exit 0)" \
    eval '[[ $rc == 0 && -f $T/tiny.bin && -f $T/tiny.bin.state && ! -s $T/out ]]'
run train "${TINY[@]}" --iters 3 -o "$T/other.bin"
cp "$T/tiny.bin" "$T/nostate.bin"
cp "$T/tiny.bin" "$T/paired_wrong.bin"; cp "$T/other.bin.state" "$T/paired_wrong.bin.state"
cp "$T/tiny.bin" "$T/state_short.bin"
head -c 100 "$T/tiny.bin.state" >"$T/state_short.bin.state"
cp "$T/tiny.bin" "$T/state_flip.bin"; cp "$T/tiny.bin.state" "$T/state_flip.bin.state"
b=$(od -An -tu1 -j 60 -N 1 "$T/tiny.bin.state" | tr -d ' ')
patch "$T/state_flip.bin.state" 60 "$(printf '\\%03o' $((b ^ 0xff)))"
cp "$T/tiny.bin" "$T/state_magic.bin"; cp "$T/tiny.bin.state" "$T/state_magic.bin.state"
patch "$T/state_magic.bin.state" 0 'SPDX'

# ---------------------------------------------------------------------------
# Bad-input table: name | exit | stderr substring(s) | arguments

ERROR_CASES=$(cat <<'TABLE'
# unknown flags
unknown short flag          | 1 | unknown option '-x'               | -x
unknown long flag           | 1 | unknown option '--bogus'          | --bogus
# a flag that takes a value, given last
-m without value            | 1 | option -m needs a value           | -m
-i without value            | 1 | option -i needs a value           | -i
-p without value            | 1 | option -p needs a value           | -p
-n without value            | 1 | option -n needs a value           | -n
-k without value            | 1 | option -k needs a value           | -k
-t without value            | 1 | option -t needs a value           | -t
-s without value            | 1 | option -s needs a value           | -s
--init without value        | 1 | option --init needs a value       | --init
--save without value        | 1 | option --save needs a value       | --save
# -n
-n 0                        | 1 | -n must be && got '0'             | -n 0
-n -5                       | 1 | -n must be && got '-5'            | -n -5
-n abc                      | 1 | -n must be && got 'abc'           | -n abc
-n 1.5                      | 1 | -n must be && got '1.5'           | -n 1.5
-n empty                    | 1 | -n must be && got ''              | -n ''
-n 99999999999              | 1 | -n must be && got '99999999999'   | -n 99999999999
-n 10000001 (max + 1)       | 1 | -n must be && 10000000            | -n 10000001
# -k
-k 0                        | 1 | -k must be && got '0'             | -k 0
-k -3                       | 1 | -k must be && got '-3'            | -k -3
-k x                        | 1 | -k must be && got 'x'             | -k x
-k 32 (= block_size)        | 1 | -k 32 is too large && block_size 32 && 1..31 | -k 32
-k 4096                     | 1 | -k 4096 is too large && block_size 32 | -k 4096
# -t
-t -1                       | 1 | -t must be && got '-1'            | -t -1
-t nan                      | 1 | -t must be && got 'nan'           | -t nan
-t inf                      | 1 | -t must be && got 'inf'           | -t inf
-t abc                      | 1 | -t must be && got 'abc'           | -t abc
-t empty                    | 1 | -t must be && got ''              | -t ''
-t 1e7                      | 1 | -t must be && got '1e7'           | -t 1e7
# -s and --init
-s -1                       | 1 | -s must be && got '-1'            | -s -1
-s abc                      | 1 | -s must be && got 'abc'           | -s abc
-s 1.5                      | 1 | -s must be && got '1.5'           | -s 1.5
-s 2^64 overflow            | 1 | -s must be && got '99999999999999999999' | -s 99999999999999999999
--init -1                   | 1 | --init must be && got '-1'        | --init -1
--init abc                  | 1 | --init must be && got 'abc'       | --init abc
# prompt bytes outside the vocabulary
prompt with '#'             | 1 | '#' (byte 0x23) at position 2     | -p 'ab#c'
prompt with non-ASCII byte  | 1 | byte 0xc3) at position 1          | -p $'x\xc3\xa9'
# options that exclude each other
-m with --init              | 1 | -m and --init                     | -m "$T/good.bin" --init 3
--plain with --compare      | 1 | --plain and --compare             | --plain --compare
--plain with --trace        | 1 | --trace && drop --plain           | --plain --trace
--save with --selftest      | 1 | separate actions                  | --init 7 --save "$T/x.bin" --selftest
--selftest with --compare   | 1 | separate actions                  | --selftest --compare
-t below the smallest float | 1 | too small && -t 0                 | -t 1e-50
self-test on a short corpus | 1 | self-test && 71 && make data      | --selftest -i "$T/short_corpus"
train, unknown option       | 1 | unknown train option              | train --bogus 1
train --iters 0             | 1 | --iters must be && got '0'        | train --iters 0
train --iters without value | 1 | --iters needs a value             | train --iters
train --heads 3 (C=64)      | 1 | not a multiple of n_head 3        | train --heads 3 --iters 1 -o "$T/never.bin"
train on a short corpus     | 1 | too short to train                | train -i "$T/short_corpus" -o "$T/never.bin"
train -o in a missing dir   | 1 | cannot write checkpoint           | train --iters 1 --layers 1 --embd 8 --heads 1 --block 4 -o "$T/no_such_dir/m.bin"
train -o path too long      | 1 | checkpoint path is too long       | train --iters 1 --layers 1 --embd 8 --heads 1 --block 4 -o "$T/$(printf 'a%.0s' {1..4200})"
train --resume with --seed  | 1 | drop --seed                       | train --resume --seed 3 -o "$T/tiny.bin"
train --resume with --layers | 1 | drop --layers                    | train --resume --layers 2 -o "$T/tiny.bin"
train --resume, no checkpoint | 1 | cannot open checkpoint           | train --resume -o "$T/nothing_here.bin"
train --resume, no .state   | 1 | cannot open training state && train afresh | train --resume --iters 20 -o "$T/nostate.bin"
train --resume, another run's .state | 1 | different checkpoint     | train --resume --iters 20 -o "$T/paired_wrong.bin"
train --resume, .state truncated | 1 | file is 100 bytes && truncated | train --resume --iters 20 -o "$T/state_short.bin"
train --resume, .state flipped byte | 1 | checksum mismatch           | train --resume --iters 20 -o "$T/state_flip.bin"
train --resume, .state wrong magic | 1 | wrong magic (not a specdec training state) | train --resume --iters 20 -o "$T/state_magic.bin"
train --resume, already done | 1 | already had 12 steps && --iters  | train --resume --iters 12 -o "$T/tiny.bin"
eval, unknown option        | 1 | unknown eval option               | eval -n 5
eval of a missing model     | 1 | cannot open checkpoint && --init  | eval -m "$T/nothing_here.bin"
# corpus problems
corpus missing              | 1 | cannot open corpus && make data   | -i "$T/no_such_corpus.txt"
corpus is a directory       | 1 | not a regular file                | -i "$T/dir"
corpus empty                | 1 | has 0 bytes && at least 2         | -i "$T/empty"
corpus of 1 byte            | 1 | has 1 byte; && at least 2         | -i "$T/one_byte"
corpus byte not in model    | 1 | '#' (0x23) at offset 5            | -m "$T/good.bin" -i "$T/hash_corpus"
# checkpoint problems
checkpoint missing          | 1 | cannot open checkpoint && --init  | -m "$T/no_such.bin"
checkpoint is a directory   | 1 | not a regular file                | -m "$T/dir"
checkpoint empty            | 1 | 0 bytes, shorter than the 28-byte header | -m "$T/ck_empty"
checkpoint truncated to 3   | 1 | 3 bytes, shorter than the 28-byte header | -m "$T/ck_3"
checkpoint truncated to 27  | 1 | 27 bytes, shorter than the 28-byte header | -m "$T/ck_27"
checkpoint truncated mid-vocab | 1 | file is 92 bytes && needs 839017 && truncated | -m "$T/ck_midvocab"
checkpoint truncated mid-params | 1 | file is 419508 bytes && needs 839017 | -m "$T/ck_midparams"
checkpoint one byte short   | 1 | file is 839016 bytes && needs 839017 | -m "$T/ck_minus1"
checkpoint wrong magic      | 1 | wrong magic                       | -m "$T/ck_magic"
checkpoint version 2        | 1 | version 2, this program reads version 1 | -m "$T/ck_version"
checkpoint flipped byte     | 1 | checksum mismatch                 | -m "$T/ck_flip"
checkpoint n_layer changed  | 1 | L=3 && needs && mismatched        | -m "$T/ck_nlayer"
checkpoint NaN parameter    | 1 | parameter 0 (in tensor token_embedding) is not a finite number | -m "$T/ck_nan"
# --save into a directory that does not exist
--save to missing directory | 1 | cannot write checkpoint && no_dir/x.bin | --init 7 --save "$T/no_dir/x.bin"
TABLE
)

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; s=${s%"${s##*[![:space:]]}"}; printf '%s' "$s"; }
while IFS='|' read -r c_name c_code c_want c_args; do
    [[ -z ${c_name//[[:space:]]/} || $c_name == \#* ]] && continue
    c_name=$(trim "$c_name"); c_code=$(trim "$c_code"); c_want=$(trim "$c_want")
    eval "c_argv=( $c_args )"
    run_error_case "$c_name" "$c_code" "$c_want" "${c_argv[@]}"
done <<<"$ERROR_CASES"

check "--save to a missing directory leaves no file and creates no directory" \
    eval '[[ ! -e $T/no_dir ]] && [[ -z $(find "$T" -name "*.tmp.*") ]]'

# Unreadable corpus: root can read a mode-000 file, so the case means nothing there.
if [[ $(id -u) == 0 ]]; then
    pass "error case: unreadable corpus skipped (running as root: chmod 000 does not stop root reading it)"
else
    cp "$T/hash_corpus" "$T/unreadable"
    chmod 000 "$T/unreadable"
    run_error_case "unreadable corpus" 1 "cannot open corpus && Permission denied" -i "$T/unreadable"
fi

# ---------------------------------------------------------------------------
# Things that must work

run -h
check "-h exits 0 with usage on stdout and nothing on stderr" \
    eval '[[ $rc == 0 && ! -s $T/err ]] && out_has "usage: ./specdec" && out_has "--selftest"'
run --help
check "--help exits 0 with usage on stdout" eval '[[ $rc == 0 && ! -s $T/err ]] && out_has "usage:"'

run -n 50
check "default run -n 50 exits 0" eval '[[ $rc == 0 ]]'
check "default run: stdout starts with the default prompt" \
    eval '[[ $(head -c ${#PROMPT} "$T/out") == "$PROMPT" ]]'
check "default run: stdout is prompt + 50 chars + newline ($(( ${#PROMPT} + 51 )) bytes)" \
    eval '[[ $(size_of "$T/out") == $(( ${#PROMPT} + 51 )) && $(tail -c 1 "$T/out" | od -An -tx1 | tr -d " ") == 0a ]]'
check "default run: stderr has 'tokens emitted', 'acceptance rate' and '$PARAMS parameters'" \
    eval 'err_has "tokens emitted" && err_has "acceptance rate" && err_has "$PARAMS parameters" && err_has "config:"'
check "default run: stdout has no stats or config" \
    eval '! out_has "tokens emitted" && ! out_has "acceptance rate" && ! out_has "parameters" && ! out_has "config:"'

run -n 100 -s 5; cp "$T/out" "$T/seed5a"
run -n 100 -s 5; cp "$T/out" "$T/seed5b"
run -n 100 -s 6; cp "$T/out" "$T/seed6"
check "same seed gives identical stdout" cmp -s "$T/seed5a" "$T/seed5b"
check "different seed gives different stdout" eval '! cmp -s "$T/seed5a" "$T/seed6"'

run --init 7 -s 3 -n 80; rc_a=$rc; cp "$T/out" "$T/init7"
run -m "$T/good.bin" -s 3 -n 80
check "checkpoint round trip: -m good.bin -s 3 prints what --init 7 -s 3 prints" \
    eval '[[ $rc_a == 0 && $rc == 0 && -s $T/init7 ]] && cmp -s "$T/init7" "$T/out" && err_has "$T/good.bin"'

run -t 0 --compare -n 300
check "-t 0 --compare -n 300 exits 0 and reports byte-identical greedy outputs" \
    eval '[[ $rc == 0 ]] && err_has "byte-identical" && err_has "plain decoding" && err_has "speculative decoding"'
check "--compare prints the prompt twice on stdout (speculative, then plain)" \
    eval '[[ $(grep -cF "$PROMPT" "$T/out") -ge 2 ]]'

run --trace -n 30
check "--trace -n 30 exits 0" eval '[[ $rc == 0 ]]'
check "--trace puts DRAFT, VERIFY, ACCEPT/REJECT and TRIM lines on stderr" \
    eval 'err_has DRAFT && err_has VERIFY && err_has ACCEPT/REJECT && err_has TRIM'
check "--trace keeps the trace off stdout, which holds prompt + 30 chars + newline" \
    eval '! out_has DRAFT && ! out_has VERIFY && ! out_has ACCEPT && ! out_has TRIM &&
          [[ $(size_of "$T/out") == $(( ${#PROMPT} + 31 )) ]]'

run -p '' -n 40
check "-p '' (empty prompt) exits 0 with 40 chars + newline on stdout" \
    eval '[[ $rc == 0 && $(size_of "$T/out") == 41 ]]'

long=$(head -c 100 "$CORPUS"; printf x); long=${long%x}
run -p "$long" -n 40
check "a 100-char prompt from the corpus (longer than block_size 32) works" \
    eval '[[ $rc == 0 && ${#long} == 100 && $(head -c 100 "$T/out") == "$long" && $(size_of "$T/out") == 141 ]]'

run -n 1
check "-n 1 exits 0 with prompt + 1 char + newline" \
    eval '[[ $rc == 0 && $(size_of "$T/out") == $(( ${#PROMPT} + 2 )) ]] && err_has "tokens emitted          1"'
run -k 31 -n 60
check "-k 31 (block_size - 1) works" eval '[[ $rc == 0 && $(size_of "$T/out") == $(( ${#PROMPT} + 61 )) ]]'
run -k 1 -n 60
check "-k 1 works" eval '[[ $rc == 0 && $(size_of "$T/out") == $(( ${#PROMPT} + 61 )) ]]'
run -t 0 -n 60
check "-t 0 (greedy) works" eval '[[ $rc == 0 ]] && err_has "(greedy)"'

run --plain -n 60
check "--plain exits 0, prints plain decoding stats and no speculative stats" \
    eval '[[ $rc == 0 ]] && err_has "plain decoding" && ! err_has "speculative" && ! err_has "acceptance rate"'

# The sanitizer pass skips this one: run_tests.sh runs that build's self-test
# itself, without the 60 s limit a sanitized self-test would need.
if [[ -z ${SPECDEC_BIN:-} ]]; then
    run --selftest
    check "--selftest exits 0" eval '[[ $rc == 0 ]]'
fi

# --save over an existing checkpoint with a different seed replaces it whole.
cp "$T/good.bin" "$T/over.bin"
run --init 8 --save "$T/over.bin"
check "--init 8 --save over an existing checkpoint exits 0" eval '[[ $rc == 0 && ! -s $T/out ]]'
check "the overwritten checkpoint differs from the old one and keeps the right size" \
    eval '! cmp -s "$T/good.bin" "$T/over.bin" && [[ $(size_of "$T/over.bin") == "$CKPT_SIZE" ]]'
run --init 8 -s 3 -n 80; cp "$T/out" "$T/init8"
run -m "$T/over.bin" -s 3 -n 80
check "the overwritten checkpoint generates as seed 8, not as the old seed 7" \
    eval '[[ $rc == 0 ]] && cmp -s "$T/init8" "$T/out" && ! cmp -s "$T/init7" "$T/out"'
check "no *.tmp.* files are left beside saved checkpoints" eval '[[ -z $(find "$T" -name "*.tmp.*") ]]'

# --resume continues exactly: 12 steps, then resumed to 30, gives the very bytes of 30
# steps in one run (weights, optimiser moments, batch sampler all restored).
cp "$T/tiny.bin" "$T/resumed.bin"; cp "$T/tiny.bin.state" "$T/resumed.bin.state"
run train --resume --iters 30 -o "$T/resumed.bin"
check "train --resume from step 12 to 30 exits 0 and says where it resumed" \
    eval '[[ $rc == 0 ]] && err_has "resuming at step 12 of 30"'
run train "${TINY[@]}" --iters 30 -o "$T/straight.bin"
check "12 steps + --resume to 30 == 30 steps in one run, byte for byte (checkpoint and .state)" \
    eval '[[ $rc == 0 ]] && cmp -s "$T/straight.bin" "$T/resumed.bin" &&
          cmp -s "$T/straight.bin.state" "$T/resumed.bin.state"'
run train "${TINY[@]}" --iters 29 -o "$T/short_run.bin"
check "... and the comparison can fail: 29 steps in one run differ from them" \
    eval '[[ $rc == 0 ]] && ! cmp -s "$T/straight.bin" "$T/short_run.bin"'

((nfail == 0)) || exit 1
exit 0
