#!/usr/bin/env bash
# The demo (`make run`'s two commands of ./specdec) and one ./beyond command (a tree of
# the GPT draft) under valgrind memcheck: zero errors, zero leaks. Run by
# test/run_tests.sh (so by `make test`) and by `make valgrind`.
#
# valgrind 3.19, the version on Debian 12, cannot decode AVX-512 instructions (it
# stops with SIGILL), and the release builds use them (-march=native). So this
# builds its own copies, specdec_vg and beyond_vg in $TEST_BUILD (default test/build),
# for x86-64-v3 (AVX2 and FMA: the same C, the same sums) with -g so that a report
# points at source lines. Elsewhere than x86-64 it builds without any -march.
#
# Output protocol as in run_tests.sh: one PASS/FAIL line per check.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# run_tests.sh runs every *_test.sh twice, the second time against a sanitizer
# build; valgrind does not run under ASan, and one pass is enough.
if [[ -n ${SPECDEC_BIN:-} ]]; then
    echo "PASS valgrind: the demo ran under memcheck in the first pass"
    exit 0
fi

CC=${CC:-gcc}
BUILD=${TEST_BUILD:-test/build}
nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

if ! command -v valgrind >/dev/null 2>&1; then
    fail "valgrind: not installed (fix: apt-get install valgrind)"
    exit 1
fi
arch=()
[[ $(uname -m) == x86_64 ]] && arch=(-march=x86-64-v3)
mkdir -p "$BUILD" || exit 1
for prog in specdec beyond; do
    if ! "$CC" -std=c11 -O2 -g "${arch[@]}" -ffp-contract=off -Wall -Wextra -o "$BUILD/${prog}_vg" $prog.c -lm; then
        fail "valgrind: $BUILD/${prog}_vg did not compile"
        exit 1
    fi
done

log=$(mktemp "${TMPDIR:-/tmp}/specdec_vg.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
# memcheck PROGRAM ARGS...: one command of PROGRAM (specdec or beyond) under valgrind; PASS
# only with exit 0, an error summary of 0 errors, and every heap block freed.
memcheck() {
    local prog=$1
    shift
    valgrind --tool=memcheck --leak-check=full --show-leak-kinds=all \
        --errors-for-leak-kinds=all --error-exitcode=99 --log-file="$log" \
        "$BUILD/${prog}_vg" "$@" >/dev/null 2>&1
    local rc=$?
    local errors leaks
    errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) errors.*/\1/p' "$log" | tail -n 1)
    grep -q "All heap blocks were freed -- no leaks are possible" "$log" && leaks=none || leaks=some
    if [[ $rc == 0 && $errors == 0 && $leaks == none ]]; then
        pass "valgrind memcheck: ./$prog $*: exit 0, 0 errors, all heap blocks freed"
    else
        fail "valgrind memcheck: ./$prog $*: exit $rc, ${errors:-?} errors, leaks: $leaks"
        sed -n '/ERROR SUMMARY\|definitely\|indirectly\|Invalid\|uninitialised/p' "$log" | head -n 20
    fi
}

# the two commands of `make run`
memcheck specdec --trace -n 24 -s 277 -p "To be or not to be, "
memcheck specdec --compare -t 0 -n 200
# ./beyond: a tree drafted by the GPT draft (its own model and cache), verified by the masked pass
memcheck beyond --tree 3,2,1,1 --draft gpt -n 60

((nfail == 0)) || exit 1
exit 0
