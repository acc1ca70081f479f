#!/usr/bin/env bash
# Ctrl-C during `make test` stops every test program the run started. Run by
# test/run_tests.sh (so by `make test`), or directly: bash test/interrupt_test.sh.
#
# A terminal's Ctrl-C sends SIGINT to its foreground process group. This test starts
# an inner test/run_tests.sh in a process group of its own (setsid), with its build
# directory in a temporary folder (so it never touches test/build, which the outer run
# is using) and a filter that selects the two self-test units on the shipped model, which
# run ./specdec --selftest (seconds) and ./beyond --selftest (several seconds) side by side.
# Once a ./specdec and a ./beyond of the inner run are both alive, it sends SIGINT to the
# inner run's whole process group, exactly as the terminal would, and checks:
#   - the inner run exits within 30 s, with status 130 and its closing count line;
#   - no process of the inner run is left (each carries a marker in its environment).
# It fails if run_tests.sh forgets its SIGINT trap: the units run under `timeout`, in
# process groups of their own, so the SIGINT alone never reaches them.
#
# Output protocol as in run_tests.sh: one PASS/FAIL line per check.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# run_tests.sh runs every *_test.sh twice, the second time with SPECDEC_BIN set to a
# sanitizer build; this test does not use the program's build, so once is enough.
if [[ -n ${SPECDEC_BIN:-} ]]; then
    echo "PASS interrupt: ran in the first pass"
    exit 0
fi

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

for tool in setsid timeout env; do
    if ! command -v $tool >/dev/null 2>&1; then
        fail "interrupt: $tool is not installed (fix: apt-get install util-linux coreutils)"
        exit 1
    fi
done
for bin in ./specdec ./beyond; do
    if [[ ! -x $bin ]]; then
        fail "interrupt: $bin is missing (run make)"
        exit 1
    fi
done
if [[ ! -f tinyshakespeare/model.bin ]]; then
    fail "interrupt: tinyshakespeare/model.bin is missing (the self-tests this test stops run on it)"
    exit 1
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_interrupt.XXXXXX") || { echo "FAIL interrupt: mktemp -d failed"; exit 1; }
MARK="specdec_interrupt_$$_$RANDOM"
cleanup() {
    # whatever the outcome, nothing of the inner run may outlive this test
    local p
    for p in $(marked); do kill -KILL "$p" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

# marked: the pids of live processes whose environment carries the marker (grep -z
# reads each /proc/PID/environ as NUL-separated lines; -s: processes that end meanwhile
# or are not ours to read are passed over).
marked() {
    grep -lsxz "SPECDEC_INTERRUPT_MARK=$MARK" /proc/[0-9]*/environ |
        sed 's|^/proc/\([0-9]*\)/environ$|\1|' | grep -vx -e "$$" -e "$BASHPID"
}

# marked_running PROGRAM: true if one of the marked processes is a running PROGRAM --selftest.
marked_running() {
    local p
    for p in $(marked); do
        [[ $({ tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null) == "$1 --selftest"* ]] && return 0
    done
    return 1
}
# both_running: a ./specdec and a ./beyond of the inner run are both alive.
both_running() { marked_running ./specdec && marked_running ./beyond; }

# The inner run, in its own session and process group (its pid is the group's id).
# A job started with & in a script ignores SIGINT, and bash cannot trap a signal that
# was ignored when it started; a terminal's foreground job has it at its default, so
# env --default-signal=INT gives the inner run what `make test` has at a terminal.
# The filter selects "./specdec --selftest -m tinyshakespeare/model.bin" and the same of
# ./beyond, and no sanitizer build (their names hold the random model's path).
SPECDEC_INTERRUPT_MARK=$MARK TESTS_FILTER="--selftest -m tinyshakespeare/model.bin" TEST_BUILD="$T/build" \
    TEST_JOBS=2 setsid env --default-signal=INT bash test/run_tests.sh >"$T/out" 2>&1 &
inner=$!

# Wait (up to 120 s: the machine may be busy) until a ./specdec and a ./beyond of the inner
# run are alive together.
for ((i = 0; i < 1200; i++)); do
    both_running && break
    kill -0 "$inner" 2>/dev/null || break
    sleep 0.1
done
if ! both_running; then
    fail "interrupt: no ./specdec --selftest and ./beyond --selftest of the inner run were seen running together (inner output: $(tail -3 "$T/out" | tr '\n' ' '))"
    exit 1
fi
before=$(marked | wc -l)

# Ctrl-C: SIGINT to the inner run's whole process group, as a terminal sends it.
kill -INT -- "-$inner"
for ((i = 0; i < 300; i++)); do
    kill -0 "$inner" 2>/dev/null || break
    sleep 0.1
done
if kill -0 "$inner" 2>/dev/null; then
    fail "interrupt: run_tests.sh still running 30 s after SIGINT"
    exit 1
fi
wait "$inner"
rc=$?
last=$(tail -1 "$T/out")
if ((rc == 130)) && [[ $last =~ ^[0-9]+\ passed,\ [0-9]+\ failed ]] && grep -q '^interrupted:' "$T/out"; then
    pass "interrupt: run_tests.sh stopped on SIGINT with status 130 and its count line ('$last')"
else
    fail "interrupt: after SIGINT run_tests.sh exited with status $rc, last line '$last' (want 130 and 'N passed, M failed')"
fi

# Give SIGTERM a moment to land, then nothing marked may be left.
for ((i = 0; i < 50; i++)); do
    [[ -z $(marked) ]] && break
    sleep 0.1
done
left=$(marked)
if [[ -z $left ]]; then
    pass "interrupt: all $before processes of the inner run (./specdec, ./beyond, timeout, shells) are gone"
else
    fail "interrupt: processes of the inner run still alive after SIGINT: $(for p in $left; do { tr '\0' ' ' <"/proc/$p/cmdline"; } 2>/dev/null; echo -n '; '; done)"
fi

((nfail == 0)) || exit 1
exit 0
