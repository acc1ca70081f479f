#!/usr/bin/env bash
# Fuzz tests for specdec: builds the two libFuzzer targets, test/fuzz_checkpoint.c
# (the checkpoint and training-state loaders) and test/fuzz_args.c (the command line),
# replays every committed regression input, then fuzzes each target for a while.
# Run by test/run_tests.sh (make test: 10 s per target) and by make fuzz (5 minutes
# per target); or directly, from anywhere:
#
#     bash test/fuzz_test.sh [SECONDS]
#
# SECONDS per target: the argument if given (make fuzz passes FUZZ_SECONDS, 300 by
# default), uncapped; otherwise FUZZ_SECONDS from the environment (default 10), capped
# at 30 so that make test stays quick whatever the environment says.
#
# Output protocol (as every test here): one "PASS "/"FAIL " line per regression input
# and per target, with the executions and final coverage of the run; exit 1 on any
# FAIL. The fuzzer's own log goes to $B/fuzz_<target>.log (B: $TEST_BUILD, default
# test/build); on a failure its end is shown here too, with the saved input and the
# commands to replay and minimise it.
#
# Files, all under $B (git-ignored) except the regressions:
#   fuzz_checkpoint, fuzz_args  the targets; fuzz_seeds, which writes the seeds
#   fuzz_seeds_<target>/        seeds, rewritten every run (nothing binary is committed)
#   fuzz_corpus_<target>/       the corpus libFuzzer grows; kept, so runs build on each other
#   fuzz_artifacts/             inputs that crashed a target
#   test/fuzz_regressions/      committed inputs that once failed: <target>-<what>
#                               (checkpoint-* or args-*); see its README.md
#
# Environment:
#   FUZZ_SECONDS  see above
#   FUZZ_CC       the compiler (default clang: libFuzzer is clang's)
#   FUZZ_CFLAGS   extra flags for the targets
#   FUZZ_TARGETS  which targets to build, replay and fuzz (default "checkpoint args")
#   SPECDEC_BIN   set by run_tests.sh for its second pass, against a sanitizer build of
#                 ./specdec: the targets do not use it (they include specdec.c and are
#                 sanitizer builds already), so that pass only says the first one ran

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

if [[ -n ${SPECDEC_BIN:-} ]]; then
    echo "PASS fuzz: ran in the first pass (the targets are sanitizer builds of specdec.c" \
         "already; SPECDEC_BIN=$SPECDEC_BIN is not used)"
    exit 0
fi

CLANG=${FUZZ_CC:-clang}
read -r -a EXTRA <<<"${FUZZ_CFLAGS:-}"
# the issue's flags; -fno-sanitize-recover=all makes an undefined-behaviour report fatal,
# or libFuzzer would log it and carry on without counting it as a crash
FLAGS=(-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11
       -ffp-contract=off -Wall -Wextra "${EXTRA[@]}")
SEED_FLAGS=(-g -O1 -fsanitize=address,undefined -fno-sanitize-recover=all -std=c11
            -ffp-contract=off -Wall -Wextra)
read -r -a TARGETS <<<"${FUZZ_TARGETS:-checkpoint args}"
B=${TEST_BUILD:-test/build} # the runner's build folder, when it names one

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

# seconds per target
if (($# > 0)); then
    secs=$1
    cap=
else
    secs=${FUZZ_SECONDS:-10}
    cap=30
fi
if [[ ! $secs =~ ^[0-9]+$ ]] || ((10#$secs < 1)); then
    fail "fuzz: seconds per target must be a whole number >= 1, got '$secs'"
    exit 1
fi
secs=$((10#$secs))
if [[ -n $cap ]] && ((secs > cap)); then
    echo "note: FUZZ_SECONDS=$secs capped at $cap for this run (pass the seconds as an" \
         "argument, as make fuzz does, for a longer one)"
    secs=$cap
fi

# clang with libFuzzer's runtime: say what is missing instead of skipping
if ! command -v "$CLANG" >/dev/null 2>&1; then
    fail "fuzz: $CLANG not found; the fuzz targets need clang and its libFuzzer" \
         "(fix: apt-get install clang)"
    exit 1
fi
mkdir -p "$B" "$B/fuzz_artifacts" || exit 1
probe_out=$(printf '%s\n' '#include <stdint.h>' '#include <stddef.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' |
    "$CLANG" -x c - -fsanitize=fuzzer,address,undefined -o "$B/fuzz_probe" 2>&1)
if (($? != 0)); then
    echo "$probe_out" | head -n 5
    fail "fuzz: $CLANG cannot link -fsanitize=fuzzer,address,undefined (libFuzzer or" \
         "sanitizer runtime missing; fix: apt-get install clang)"
    exit 1
fi
rm -f "$B/fuzz_probe"

# build: the targets, then the seeds (a target that does not build is one FAIL)
if [[ -n ${FUZZ_CFLAGS:-} ]]; then
    echo "note: the targets are built with FUZZ_CFLAGS=$FUZZ_CFLAGS, which may relax their checks"
fi
built=()
for t in "${TARGETS[@]}"; do
    if [[ $t != checkpoint && $t != args ]]; then
        fail "fuzz: unknown target '$t' in FUZZ_TARGETS (the targets are checkpoint and args)"
        continue
    fi
    echo "=== compile $B/fuzz_$t"
    if "$CLANG" "${FLAGS[@]}" -o "$B/fuzz_$t" "test/fuzz_$t.c" -lm 2>&1; then
        built+=("$t")
    else
        rm -f "$B/fuzz_$t"
        fail "fuzz $t: test/fuzz_$t.c did not compile ($CLANG ${FLAGS[*]} -o $B/fuzz_$t" \
             "test/fuzz_$t.c -lm)"
    fi
done
is_built() { [[ " ${built[*]} " == *" $1 "* ]]; }
seeds_ok=0
echo "=== compile $B/fuzz_seeds"
if "$CLANG" "${SEED_FLAGS[@]}" -o "$B/fuzz_seeds" test/fuzz_seeds.c -lm 2>&1; then
    rm -rf "$B/fuzz_seeds_checkpoint" "$B/fuzz_seeds_args"
    mkdir -p "$B/fuzz_seeds_checkpoint" "$B/fuzz_seeds_args" &&
        "$B/fuzz_seeds" "$B/fuzz_seeds_checkpoint" "$B/fuzz_seeds_args" && seeds_ok=1
fi
((seeds_ok)) || fail "fuzz: the seed generator test/fuzz_seeds.c did not build or run"

# first reason a log gives for a failure: our own check, a sanitizer, or libFuzzer
reason() {
    # printable ASCII only: the message may quote the input's bytes
    grep -a -m1 -E '^fuzz_(checkpoint|args): |ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error: ' "$1" |
        LC_ALL=C tr -c ' -~' '?' | cut -c1-200
}

# the committed regression inputs: each must replay cleanly on its target
shopt -s nullglob
for f in test/fuzz_regressions/*; do
    base=${f##*/}
    case $base in
        README*) continue ;;
        checkpoint-*) t=checkpoint ;;
        args-*) t=args ;;
        *) fail "fuzz regression $base: the name must start with checkpoint- or args-"; continue ;;
    esac
    [[ " ${TARGETS[*]} " == *" $t "* ]] || continue # not asked for (FUZZ_TARGETS)
    if ! is_built "$t"; then
        fail "fuzz regression $base: not replayed, $B/fuzz_$t did not build"
        continue
    fi
    log=$B/fuzz_replay.log
    if timeout 60 "$B/fuzz_$t" "$f" >"$log" 2>&1; then
        pass "fuzz regression $base: $B/fuzz_$t replays it cleanly"
    else
        fail "fuzz regression $base: $B/fuzz_$t still fails on it: $(reason "$log")" \
             "(replay: $B/fuzz_$t $f)"
    fi
done

# fuzz each target for secs seconds, one after the other (one core)
for t in "${TARGETS[@]}"; do
    is_built "$t" && ((seeds_ok)) || continue
    bin=$B/fuzz_$t
    log=$B/fuzz_$t.log
    corpus=$B/fuzz_corpus_$t
    mkdir -p "$corpus" || exit 1
    echo "=== fuzz $t for ${secs}s: $bin -max_total_time=$secs ... (log: $log)"
    # -timeout: one input running 10 s is a hang, reported like a crash; the outer
    # timeout only guards against libFuzzer itself not stopping
    start=$SECONDS
    timeout $((secs + 300)) "$bin" -max_total_time="$secs" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$B/fuzz_artifacts/$t-" "$corpus" "$B/fuzz_seeds_$t" >"$log" 2>&1
    status=$?
    took=$((SECONDS - start))
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    stats=$(grep -a -o 'cov: [0-9]* ft: [0-9]* corp: [0-9]*' "$log" | tail -n 1)
    read -r _ cov _ ft _ corp <<<"${stats:-- ? - ? - ?}"
    summary="${execs:-?} executions in $took s, coverage $cov edges ($ft features), corpus $corp inputs"
    if ((status == 0)) && [[ -n $execs ]]; then
        pass "fuzz $t: $summary, no crash"
    else
        art=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
        echo "--- end of $log:"
        grep -a -v -E '^#[0-9]+[[:space:]]+(NEW|REDUCE|pulse)' "$log" | tail -n 40
        echo "---"
        if [[ -n $art ]]; then
            fail "fuzz $t: $(reason "$log") (exit $status after $summary; input saved as $art;" \
                 "replay: $bin $art; minimise: $bin -minimize_crash=1 -runs=100000 $art;" \
                 "then commit it as test/fuzz_regressions/$t-<what>)"
        else
            fail "fuzz $t: exit status $status after $summary, no input saved; see $log"
        fi
    fi
done

exit $((nfail > 0))
