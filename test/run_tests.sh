#!/usr/bin/env bash
# Test aggregator for specdec. Normally run as `make test`, which builds
# ./specdec (and ./specdec_debug, to prove it builds) and fetches the corpus first.
#
# What it runs, always from the repository root:
#   1. every test/test_*.c, compiled twice into test/build/: <name> with the
#      release flags and <name>_san with AddressSanitizer + UBSan; a test whose
#      header has a line " * broken build: -DFLAG" also as <name>_broken, with
#      that flag, which breaks specdec.c on purpose (the test expects to fail);
#   2. ./specdec --selftest --init 1337, the same with test/build/specdec_san
#      (a sanitizer build of specdec.c), and ./specdec --selftest on the
#      shipped trained model tinyshakespeare/model.bin;
#   3. every test/*_test.sh, run with bash, against ./specdec and again
#      against test/build/specdec_san (through SPECDEC_BIN).
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
#                 ./specdec --selftest --init 1337, test/x_test.sh
#   TEST_TIMEOUT  seconds before one test program is killed (default 1800;
#                 needs the timeout command, 0 disables)
#
# The last line of output is always "N passed, M failed". The exit status
# is 1 if M > 0 or N == 0, else 0.

set -u

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

CC=${CC:-gcc}
FILTER=${TESTS_FILTER:-}
TIMEOUT=${TEST_TIMEOUT:-1800}
RELEASE_FLAGS=(-std=c11 -O3 -march=native -Wall -Wextra -ffp-contract=off)  # as the Makefile builds specdec
SAN_FLAGS=(-std=c11 -O1 -g -ffp-contract=off "-fsanitize=address,undefined"
           -fno-omit-frame-pointer -fno-sanitize-recover=all)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

shopt -s nullglob

passed=0
failed=0
failed_names=()
out_file=$(mktemp "${TMPDIR:-/tmp}/specdec_test.XXXXXX") || exit 1
trap 'rm -f "$out_file"' EXIT

# selected NAME: true if NAME passes TESTS_FILTER.
selected() {
    [[ -z $FILTER || $1 == *"$FILTER"* ]]
}

# fail NAME MESSAGE: record one failure that is not from a test's own output.
fail() {
    echo "FAIL $1 $2"
    failed=$((failed + 1))
    failed_names+=("$1")
}

# run_test NAME CMD...: run CMD, echo its output as it goes, count its
# PASS/FAIL lines, and add one failure if it exits non-zero without FAIL.
run_test() {
    local name=$1 status npass nfail
    shift
    echo "=== $name"
    if [[ $TIMEOUT != 0 ]] && command -v timeout >/dev/null 2>&1; then
        timeout "$TIMEOUT" "$@" 2>&1 | tee "$out_file"
    else
        "$@" 2>&1 | tee "$out_file"
    fi
    status=${PIPESTATUS[0]}
    npass=$(grep -c '^PASS ' "$out_file")
    nfail=$(grep -c '^FAIL ' "$out_file")
    passed=$((passed + npass))
    failed=$((failed + nfail))
    if ((nfail > 0)); then
        failed_names+=("$name")
    fi
    if ((status != 0 && nfail == 0)); then
        if [[ $TIMEOUT != 0 ]] && ((status == 124)); then
            fail "$name" "timed out after ${TIMEOUT}s (exit status 124)"
        else
            fail "$name" "exited with status $status"
        fi
    elif ((status == 0 && npass == 0 && nfail == 0)); then
        echo "note: $name printed no PASS/FAIL lines"
    fi
}

# compile_test SRC OUT FLAGS...: build one test program; a failure counts
# as one failed test and the compiler's messages are shown.
compile_test() {
    local src=$1 out=$2
    shift 2
    echo "=== compile $out"
    if "$CC" "$@" -o "$out" "$src" -lm 2>&1; then
        return 0
    fi
    rm -f "$out"
    fail "$out" "did not compile ($CC $* -o $out $src -lm)"
    return 1
}

# 1. C unit tests, release and sanitizer builds.
mkdir -p test/build || exit 1
for src in test/test_*.c; do
    base=$(basename "$src" .c)
    bin=test/build/$base
    if selected "$bin"; then
        compile_test "$src" "$bin" "${RELEASE_FLAGS[@]}" && run_test "$bin" "./$bin"
    fi
    if selected "${bin}_san"; then
        compile_test "$src" "${bin}_san" "${SAN_FLAGS[@]}" && run_test "${bin}_san" "./${bin}_san"
    fi
    # a test whose header names a "broken build: -DFLAG" is built once more with that
    # flag, which breaks specdec.c on purpose: the test then passes only if it fails
    broken=$(sed -n 's|^ \* broken build: \(-D[A-Za-z0-9_]*\)$|\1|p' "$src")
    if [[ -n $broken ]] && selected "${bin}_broken"; then
        compile_test "$src" "${bin}_broken" "${RELEASE_FLAGS[@]}" "$broken" &&
            run_test "${bin}_broken" "./${bin}_broken"
    fi
done

# 2. The program's built-in self-test: the release build, and a sanitizer
# build of specdec.c made here (-O1 like the test programs: -O0, as in
# `make debug`, is for gdb and runs the self-test five times slower).
san_bin=test/build/specdec_san
for name in "./specdec --selftest --init 1337" "$san_bin --selftest --init 1337" \
            "./specdec --selftest -m tinyshakespeare/model.bin"; do
    selected "$name" || continue
    bin=${name%% *}
    # the shipped, trained model, when the checkout has it
    if [[ $name == *model.bin && ! -f tinyshakespeare/model.bin ]]; then
        echo "note: no tinyshakespeare/model.bin: the trained model's self-test is skipped"
        continue
    fi
    if [[ $bin == "$san_bin" ]]; then
        compile_test specdec.c "$san_bin" "${SAN_FLAGS[@]}" || continue
    elif [[ ! -x $bin ]]; then
        fail "$name" "cannot run: $bin is missing (run make first)"
        continue
    fi
    read -r -a args <<<"${name#* }"
    run_test "$name" "$bin" "${args[@]}"
done

# 3. Shell-script tests, against the release build and again against the
# sanitizer build (SPECDEC_BIN), so every bad input also runs under ASan/UBSan.
for script in test/*_test.sh; do
    if selected "$script"; then
        run_test "$script" bash "$script"
    fi
    if selected "$script (sanitizers)" && [[ -x $san_bin ]]; then
        run_test "$script (sanitizers)" env SPECDEC_BIN="$san_bin" bash "$script"
    fi
done

echo
if ((${#failed_names[@]} > 0)); then
    echo "failing: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed"
if ((failed > 0 || passed == 0)); then
    exit 1
fi
exit 0
