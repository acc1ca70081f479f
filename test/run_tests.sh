#!/usr/bin/env bash
# Test aggregator for specdec. Normally run as `make test` (the quick tier) or `make check`
# (the full tier, which .ci/run runs), each of which builds ./specdec, ./beyond and the tools
# beside them (and ./specdec_debug and ./beyond_debug, which gdb runs) and fetches the corpus
# first.
#
# What it runs, always from the repository root:
#   1. every test/test_*.c, compiled into test/build/ (or $TEST_BUILD): <name> with the release
#      flags and <name>_san with AddressSanitizer + UBSan; a test whose header
#      has lines " * broken build: -DBREAK_X" also as <name>_broken_X, once per
#      flag, which plants a known bug (the tests that must see it expect to fail). With a
#      line " * mutant BREAK_X: EDIT" the bug is a sed EDIT of one line of specdec.c, which
#      the build includes instead of specdec.c itself (-DSPECDEC_C=copy); with a line
#      " * mutant-beyond BREAK_X: EDIT" it is a sed EDIT of one line of beyond.c, which the
#      build includes instead of beyond.c (-DBEYOND_C=copy, and -DSPECDEC_C=the real
#      specdec.c by its absolute path). An EDIT that no longer changes exactly one line
#      is a FAIL (the mutant is stale). A line " * splice: EDIT" makes every build of that test
#      include a copy of specdec.c with that one-line sed EDIT (test_exact's forced uniforms);
#      its mutants then edit that copy;
#   2. the programs' built-in self-tests: ./specdec --selftest and ./beyond --selftest on a
#      seeded random model (test/build/random1337.bin, which tinyshakespeare/train init
#      --seed 1337 writes), ./specdec's also with test/build/specdec_san (a sanitizer build
#      of specdec.c), and both on the shipped trained model tinyshakespeare/model.bin, where
#      ./beyond's also runs as test/build/beyond_san (the shipped drafts' paths under
#      ASan/UBSan; the model's path is spelt ./tinyshakespeare/model.bin there, which keeps
#      that slow unit out of interrupt_test's filter);
#   3. every test/*_test.sh, run with bash, against ./specdec and ./beyond and again
#      against the sanitizer builds (through SPECDEC_BIN and BEYOND_BIN).
# The full tier runs all of it. The quick tier (TEST_TIER=quick, `make test`) runs the units
# QUICK_UNITS names below, release builds only: see there, and notes/testing.md, for which
# and why.
# Each of these units (a compile and its run) is independent, so up to
# TEST_JOBS of them run at once, slowest first (see below); the output of each is shown
# whole, in the order they started, as soon as it and the units before it have finished.
#
# Protocol: a test prints one line per check starting with "PASS " or
# "FAIL "; every other line is commentary. A program that exits non-zero
# without printing any FAIL line counts as one extra failure. A test/*.c
# file that does not compile counts as one failure.
#
# Environment:
#   CC            C compiler (default gcc)
#   TESTS_FILTER  only run tests whose name contains this substring; names
#                 look like test/build/test_x, test/build/test_x_san,
#                 test/build/test_x_broken_Y, ./specdec --selftest -m test/build/random1337.bin,
#                 ./beyond --selftest -m tinyshakespeare/model.bin, test/x_test.sh,
#                 test/x_test.sh (sanitizers)
#   TEST_TIMEOUT  seconds before one test program is killed (default 1800;
#                 needs the timeout command, 0 disables)
#   TEST_JOBS     units run at once (default: the number of CPUs)
#   TEST_BUILD    where test programs are built (default test/build)
#   TEST_TIER     quick or full (default full): which units run; TESTS_FILTER then picks
#                 among them
#
# Ctrl-C (SIGINT) or SIGTERM stops the whole run: every test program it started,
# however deep (each unit runs under `timeout`, in a process group of its own, where
# the terminal's SIGINT does not reach it), gets SIGTERM, and the script exits 130.
#
# The last line of output is always "N passed, M failed". The exit status
# is 1 if M > 0 or N == 0, else 0.

set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

CC=${CC:-gcc}
FILTER=${TESTS_FILTER:-}
BUILD=${TEST_BUILD:-test/build}
TIMEOUT=${TEST_TIMEOUT:-1800}
JOBS=${TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || JOBS=1
TIER=${TEST_TIER:-full}
if [[ $TIER != quick && $TIER != full ]]; then
    echo "run_tests.sh: TEST_TIER='$TIER' is not a tier; use TEST_TIER=quick (make test) or TEST_TIER=full (make check)" >&2
    exit 2
fi
RELEASE_FLAGS=(-std=c11 -O3 -march=native -Wall -Wextra -ffp-contract=off)  # as the Makefile builds specdec
# -O2 -march=native: sanitizer builds run the forward pass 20-50x slower than release,
# and at -O1 without FMA instructions (fmaf becomes a libm call) twice slower again
SAN_FLAGS=(-std=c11 -O2 -march=native -g -ffp-contract=off "-fsanitize=address,undefined"
           -fno-omit-frame-pointer -fno-sanitize-recover=all)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

shopt -s nullglob

passed=0
failed=0
failed_names=()
work=$(mktemp -d "${TMPDIR:-/tmp}/specdec_test.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
t_start=$SECONDS

# descendants: the pid of every process below this script, however deep, read from
# /proc (each process's PPid), leaving out the subshell that asks and its own children.
# grep -s reads the files: a process that ends between the glob and the read is passed
# over (mawk, Debian's awk, would stop at its missing file and print no pid at all).
descendants() {
    local self=$BASHPID # the asking subshell; grep and awk below are its children
    grep -s '^PPid:' /proc/[0-9]*/status | awk -v root=$$ -v self="$self" '
        { split($1, f, "/"); parent[f[3]] = $2 }
        END {
            below[root] = 1
            for (changed = 1; changed; ) {
                changed = 0
                for (p in parent)
                    if (!(p in below) && (parent[p] in below)) { below[p] = 1; changed = 1 }
            }
            for (p in below)
                if (p != root && p != self && parent[p] != self) print p
        }'
}

# stop_all: on Ctrl-C or SIGTERM, SIGTERM to every process below (timeout passes it on
# to its command), again while any is left, SIGKILL after 5 s; then exit 130.
stop_all() {
    trap - INT TERM
    echo
    echo "interrupted: stopping every test program this run started"
    local pids tries=0
    pids=$(descendants)
    while [[ -n $pids ]] && ((tries < 25)); do
        kill -TERM $pids 2>/dev/null
        sleep 0.2
        tries=$((tries + 1))
        pids=$(descendants)
    done
    [[ -n $pids ]] && kill -KILL $pids 2>/dev/null
    echo "$passed passed, $failed failed (interrupted)"
    exit 130
}
trap stop_all INT TERM

# The quick tier: the proofs a reader of the code relies on, on release builds, in under
# three minutes on two idle cores (notes/testing.md has each unit's CPU time and why it is
# where it is). It leaves to the full tier the sanitizer builds and passes, the planted bugs
# other than the samplers, the units of what beyond.c adds beyond the tree's rule
# (test_beyond, test_drafts, test_eagle), of the trainer (test_train, test_medusa), the
# in-process non-finite checks (test_nonfinite; nonfinite_test runs their command line),
# and the tests of the tools around the code (fuzzing, valgrind, gdb_test, Ctrl-C).
random_model=$BUILD/random1337.bin # the self-test's random model, written below
QUICK_UNITS=(
    # the docs' quoted outputs, quoted source and gdb sessions (gdb_test.sh among them), and
    # the README's figures
    test/docs_test.sh test/quotes_test.sh test/readme_test.sh
    # the bad-input rows and what must work, every option honoured or refused, a checkpoint
    # that overflows (release builds; cli_test and modes_test have TEST_TIER hooks)
    test/cli_test.sh test/modes_test.sh test/nonfinite_test.sh
    # the reading budget and what a clone holds: a second each; the demo's round 1 as a
    # picture, against the trace (a second, and the planted swap's build)
    test/style_test.sh test/repo_test.sh test/picture_test.sh
    # greedy equivalence of every draft and shape, on a random and on the trained model
    "./specdec --selftest -m $random_model" "./specdec --selftest -m tinyshakespeare/model.bin"
    "./beyond --selftest -m $random_model" "./beyond --selftest -m tinyshakespeare/model.bin"
    # exactness: the enumeration, the chi-squares (a fifth of the runs in this tier), greedy
    # runs, the copies of the loops, each round's rows and caches
    "$BUILD/test_exact"
    # the broken samplers that the enumeration and the chi-squares must catch: a wrong
    # residual, a wrong ratio, a q row that is not the one drawn from (three ways)
    "$BUILD/test_exact_broken_RESIDUAL" "$BUILD/test_exact_broken_RATIO"
    "$BUILD/test_exact_broken_DRAFT_Q" "$BUILD/test_exact_broken_FILTER_DRAFT"
    "$BUILD/test_exact_broken_UNFILTERED_Q"
    # trees: the node rule enumerated, the masked pass, greedy trees, the chi-squares, and
    # the node rule's broken sampler
    "$BUILD/test_tree" "$BUILD/test_tree_broken_TREE_Q"
    # the lesson's own units: the model against a double-precision reference, the cache,
    # sampling, greedy equivalence, the files
    "$BUILD/test_specdec"
)

# in_tier NAME: true if the tier runs unit NAME (the full tier runs every unit).
in_tier() {
    local u
    [[ $TIER == full ]] && return 0
    for u in "${QUICK_UNITS[@]}"; do
        [[ $1 == "$u" ]] && return 0
    done
    return 1
}

# selected NAME: true if the tier runs NAME and it passes TESTS_FILTER.
selected() {
    in_tier "$1" && [[ -z $FILTER || $1 == *"$FILTER"* ]]
}

# fail NAME MESSAGE: record one failure that is not from a test's own output.
fail() {
    echo "FAIL $1 $2"
    failed=$((failed + 1))
    failed_names+=("$1")
}

# run_timed CMD...: run CMD under the time limit, stderr into stdout.
run_timed() {
    if [[ $TIMEOUT != 0 ]] && command -v timeout >/dev/null 2>&1; then
        timeout "$TIMEOUT" "$@" 2>&1
    else
        "$@" 2>&1
    fi
}

# compile_and_run SRC OUT FLAGS...: build one test program and run it. A
# compile error prints one FAIL line with the compiler's messages above it.
compile_and_run() {
    local src=$1 out=$2
    shift 2
    echo "=== compile $out"
    if ! "$CC" "$@" -o "$out" "$src" -lm 2>&1; then
        rm -f "$out"
        echo "FAIL $out did not compile ($CC $* -o $out $src -lm)"
        return 1
    fi
    [[ $out == /* ]] || out=./$out # TEST_BUILD may be absolute
    run_timed "$out"
}

# Units run in the background; unit i writes $work/i.log, then $work/i.rc.
unit_names=()
unit_starts=()
n_shown=0

# cpu_seconds FILE: the user + system seconds in the output of `times` in FILE (lines
# like "0m1.250s 0m0.031s"), to one decimal.
cpu_seconds() {
    awk '{ for (i = 1; i <= NF; i++) { split($i, f, /[ms]/); t += 60 * f[1] + f[2] } }
         END { printf "%.1f", t }' "$1"
}

# Progress, printed as it happens (the full logs follow in order, and a slow unit
# would otherwise hold back every line after it): one line when a unit starts, one
# when it ends, with its counts and the running totals.
noted=()
cpu_total=0
so_far_pass=0
so_far_fail=0
n_noted=0
note_progress() {
    local id np nf cpu
    for ((id = 0; id < ${#unit_names[@]}; id++)); do
        [[ -n ${noted[id]:-} || ! -f $work/$id.rc ]] && continue
        noted[id]=1
        np=$(grep -c '^PASS ' "$work/$id.log")
        nf=$(grep -c '^FAIL ' "$work/$id.log")
        so_far_pass=$((so_far_pass + np))
        so_far_fail=$((so_far_fail + nf))
        n_noted=$((n_noted + 1))
        cpu=$(cpu_seconds "$work/$id.times")
        cpu_total=$(awk -v a="$cpu_total" -v b="$cpu" 'BEGIN { printf "%.1f", a + b }')
        echo "[$((SECONDS - t_start)) s] done: ${unit_names[id]} in $((SECONDS - unit_starts[id])) s ($cpu s of CPU)," \
             "$np passed, $nf failed; so far $so_far_pass passed, $so_far_fail failed" \
             "(units done: $n_noted of ${#unit_names[@]} started)"
    done
}

# show_finished: print, in order, every finished unit not yet shown, counting its
# PASS/FAIL lines and adding one failure if it exited non-zero without a FAIL.
show_finished() {
    local name status npass nfail
    while ((n_shown < ${#unit_names[@]})) && [[ -f $work/$n_shown.rc ]]; do
        name=${unit_names[n_shown]}
        echo "=== $name"
        cat "$work/$n_shown.log"
        status=$(cat "$work/$n_shown.rc")
        npass=$(grep -c '^PASS ' "$work/$n_shown.log")
        nfail=$(grep -c '^FAIL ' "$work/$n_shown.log")
        passed=$((passed + npass))
        failed=$((failed + nfail))
        ((nfail > 0)) && failed_names+=("$name")
        if ((status != 0 && nfail == 0)); then
            if [[ $TIMEOUT != 0 ]] && ((status == 124)); then
                fail "$name" "timed out after ${TIMEOUT}s (exit status 124)"
            else
                fail "$name" "exited with status $status"
            fi
        elif ((status == 0 && npass == 0 && nfail == 0)); then
            echo "note: $name printed no PASS/FAIL lines"
        fi
        n_shown=$((n_shown + 1))
    done
}

# unit NAME CMD...: start CMD in the background once fewer than JOBS units run.
unit() {
    local name=$1 id=${#unit_names[@]}
    shift
    # poll rather than `wait -n`, which older bash versions can miss a job with
    while (($(jobs -rp | wc -l) >= JOBS)); do
        sleep 0.2
        note_progress
        show_finished
    done
    unit_names+=("$name")
    unit_starts+=("$SECONDS")
    echo "[$((SECONDS - t_start)) s] start: $name"
    # `times` in the unit's subshell: the CPU time of everything the unit ran (its second
    # line, the children's user and system time), which a loaded machine does not inflate
    ( "$@" >"$work/$id.log" 2>&1; echo $? >"$work/$id.rc.tmp"; times >"$work/$id.times"
      mv "$work/$id.rc.tmp" "$work/$id.rc" ) &
}

echo "running the $TIER tier, up to $JOBS test units at once"

# The sanitizer builds of specdec.c and beyond.c, made first: the self-tests and the CLI
# tests below run them. (-O2 like the test programs; -O0, as in `make debug`, is for gdb.)
san_bin=$BUILD/specdec_san
beyond_san=$BUILD/beyond_san
mkdir -p "$BUILD" || exit 1
need_san=0 # only when a selected unit runs it
selected "$san_bin --selftest -m $random_model" && need_san=1
selected "$beyond_san --selftest -m ./tinyshakespeare/model.bin" && need_san=1
for script in test/*_test.sh; do selected "$script (sanitizers)" && need_san=1; done
if ((need_san)); then
    for pair in "$san_bin specdec.c" "$beyond_san beyond.c"; do
        read -r out src <<<"$pair"
        echo "=== compile $out"
        if ! "$CC" "${SAN_FLAGS[@]}" -o "$out" "$src" -lm 2>&1; then
            rm -f "$out"
            fail "$out" "did not compile ($CC ${SAN_FLAGS[*]} -o $out $src -lm)"
        fi
    done
fi

# The self-tests' random model, a seeded checkpoint from the trainer's init (docs_test reads
# it too).
if ! tinyshakespeare/train init --seed 1337 -o "$random_model" 2>/dev/null; then
    fail "$random_model" "tinyshakespeare/train init --seed 1337 -o $random_model failed (run make first)"
fi

# The units start slowest first, so that the last ones to finish are short: the sanitizer
# builds of the C tests (1), the shell tests (3; docs_test and cli_test take longest), the
# self-tests (2), then the release and broken builds of the C tests (1).
# spliced_specdec SRC: a test whose header has a line " * splice: EDIT" (test_exact, whose
# forced uniforms need a hook that specdec.c's reader must not meet) includes, in every build,
# a copy of specdec.c with that sed EDIT applied; it must change exactly one line. Prints the
# copy's absolute path, nothing for a test without a splice; returns 1 when the EDIT is stale.
spliced_specdec() {
    local src=$1 edit copy
    edit=$(sed -n 's|^ \* splice: ||p' "$src")
    [[ -n $edit ]] || return 0
    copy=$BUILD/specdec_$(basename "$src" .c)_spliced.c
    [[ $copy == /* ]] || copy=$PWD/$copy
    # written aside, then renamed: a build already reading the copy keeps its whole file
    sed "$edit" specdec.c >"$copy.tmp" && mv "$copy.tmp" "$copy"
    [[ $(diff specdec.c "$copy" | grep -c '^>') == 1 ]] || return 1
    echo "$copy"
}
for src in test/test_*.c; do
    bin=$BUILD/$(basename "$src" .c)
    splice=() # -DSPECDEC_C=the spliced copy, for a test with a splice
    if ! copy=$(spliced_specdec "$src"); then
        fail "$bin" "the splice of $src no longer changes exactly one line of specdec.c"
        continue
    fi
    [[ -n $copy ]] && splice=("-DSPECDEC_C=\"$copy\"")
    selected "${bin}_san" && unit "${bin}_san" compile_and_run "$src" "${bin}_san" "${SAN_FLAGS[@]}" "${splice[@]}"
done
# 3. Shell-script tests, against the release builds and again against the
# sanitizer builds (SPECDEC_BIN, BEYOND_BIN), so every bad input also runs under ASan/UBSan.
for script in test/*_test.sh; do
    selected "$script" && unit "$script" run_timed bash "$script"
    if selected "$script (sanitizers)" && [[ -x $san_bin && -x $beyond_san ]]; then
        unit "$script (sanitizers)" run_timed env SPECDEC_BIN="$san_bin" BEYOND_BIN="$beyond_san" \
            bash "$script"
    fi
done
# 2. The program's built-in self-test, release and sanitizer builds, random and
# trained models.
for name in "$san_bin --selftest -m $random_model" \
            "$beyond_san --selftest -m ./tinyshakespeare/model.bin" \
            "./specdec --selftest -m $random_model" \
            "./specdec --selftest -m tinyshakespeare/model.bin" \
            "./beyond --selftest -m $random_model" "./beyond --selftest -m tinyshakespeare/model.bin"; do
    selected "$name" || continue
    bin=${name%% *}
    # the shipped, trained model, when the checkout has it
    if [[ $name == *model.bin && ! -f tinyshakespeare/model.bin ]]; then
        echo "note: no tinyshakespeare/model.bin: the trained model's self-test is skipped"
        continue
    fi
    if [[ ! -x $bin ]]; then
        fail "$name" "cannot run: $bin is missing (run make first)"
        continue
    fi
    read -r -a args <<<"${name#* }"
    unit "$name" run_timed "$bin" "${args[@]}"
done
for src in test/test_*.c; do
    bin=$BUILD/$(basename "$src" .c)
    copy=$(spliced_specdec "$src") || continue # a stale splice: failed above
    base=specdec.c # what a specdec mutant edits: the real file, or the spliced copy
    splice=()
    [[ -n $copy ]] && base=$copy && splice=("-DSPECDEC_C=\"$copy\"")
    selected "$bin" && unit "$bin" compile_and_run "$src" "$bin" "${RELEASE_FLAGS[@]}" "${splice[@]}"
    # each "broken build: -DBREAK_X" line in a test's header builds it once more with
    # that flag, which breaks specdec.c on purpose: the test then passes only if it fails
    for flag in $(sed -n 's|^ \* broken build: \(-DBREAK_[A-Za-z0-9_]*\)$|\1|p' "$src"); do
        broken=${bin}_broken_${flag#-DBREAK_}
        selected "$broken" || continue
        # a " * mutant BREAK_X: EDIT" line: the build includes a copy of specdec.c with that
        # sed edit applied, which must change exactly one line (else the mutant is stale);
        # " * mutant-beyond BREAK_X: EDIT" edits a copy of beyond.c the same way, which then
        # includes the real specdec.c by its absolute path (a test with a splice: the spliced copy,
        # which a specdec mutant edits too)
        extra=()
        for file in specdec beyond; do
            kind=mutant
            [[ $file == beyond ]] && kind=mutant-beyond
            edit=$(sed -n "s|^ \\* $kind ${flag#-D}: ||p" "$src")
            [[ -n $edit ]] || continue
            mutant=$BUILD/${file}_${flag#-DBREAK_}.c
            orig=$file.c
            [[ $file == specdec ]] && orig=$base
            sed "$edit" "$orig" >"$mutant"
            if [[ $(diff "$orig" "$mutant" | grep -c '^>') != 1 ]]; then
                fail "$broken" "the mutant edit of ${flag#-D} no longer changes exactly one line of $file.c: $edit"
                extra=(stale)
                break
            fi
            macro=SPECDEC_C
            [[ $file == beyond ]] && macro=BEYOND_C
            [[ $mutant == /* ]] || mutant=$PWD/$mutant # TEST_BUILD may be absolute
            extra+=("-D$macro=\"$mutant\"")
            [[ $file == beyond && $base == specdec.c ]] && extra+=("-DSPECDEC_C=\"$PWD/specdec.c\"")
            [[ $file == beyond && $base != specdec.c ]] && extra+=("-DSPECDEC_C=\"$base\"") # spliced
        done
        [[ ${extra[0]:-} == stale ]] && continue
        # a build with no copy of specdec.c of its own includes the spliced one, if any
        [[ " ${extra[*]} " == *-DSPECDEC_C=* ]] || extra+=("${splice[@]}")
        unit "$broken" compile_and_run "$src" "$broken" "${RELEASE_FLAGS[@]}" "$flag" "${extra[@]}"
    done
done

while (($(jobs -rp | wc -l) > 0)); do
    sleep 0.2
    note_progress
    show_finished
done
wait
note_progress
show_finished

echo
if ((${#failed_names[@]} > 0)); then
    echo "failing: ${failed_names[*]}"
fi
echo "(the $TIER tier: $((SECONDS - t_start)) s with up to $JOBS units at once; $cpu_total s of CPU in the units)"
echo "$passed passed, $failed failed"
if ((failed > 0 || passed == 0)); then
    exit 1
fi
exit 0
