#!/usr/bin/env bash
# The gdb walkthrough (test/gdb_walkthrough.gdb, explained in notes/debugging.md)
# run in batch mode on ./specdec_debug, and its numbers checked. Run by
# test/run_tests.sh (so by `make test`), or directly: bash test/gdb_test.sh.
# Needs gdb, a C compiler for `make debug`, ./specdec (make) and the corpus.
#
# What it checks: that the gdb file runs no code in the program (check 0: no `call`, no
# f(x) in an expression, no string printf argument); and, from the "WALK ..." lines the
# gdb file prints for round 1:
#   - the four breakpoints are hit, in the order draft_tokens, verify_candidates,
#     accept_reject, trim_kv_cache, each entry followed by its return;
#   - the cache lengths: the verify pass runs all_tokens = [the lag tokens,
#     current_token, c0..c(k-1)] and adds lag+k+1 positions (lag > 0 only in a round
#     that restarts a full cache; never in this run); trim starts from cache_len, the
#     position of current_token, which is the kv_len before the verify plus lag, and
#     the cache_len draft_tokens was given; trim leaves cache_len_before + num_accepted;
#   - num_accepted (what accept_reject returned and speculative_round passed on)
#     is rejected_at+1 after a rejection, else k+1 (k when no bonus is allowed);
#   - the first drafted token, its p and its q agree with round 1 of
#     ./specdec --trace with the same arguments, to the trace's 3 decimals.
# What notes/debugging.md quotes of this run (and of every other gdb session it shows)
# is checked by test/quotes_test.sh, which runs each session again and compares.
#
# Output protocol as in run_tests.sh: one PASS/FAIL line per check; exit 1 if
# any check failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# run_tests.sh runs every *_test.sh twice, the second time with SPECDEC_BIN set to
# a sanitizer build; ./specdec_debug already has the sanitizers, so once is enough.
if [[ -n ${SPECDEC_BIN:-} ]]; then
    echo "PASS gdb walkthrough: ran in the first pass"
    exit 0
fi

GDB_FILE=test/gdb_walkthrough.gdb
DEBUG_BIN=./specdec_debug
RELEASE_BIN=./specdec
# A short run whose first round starts at cache length 6 (the 6-token prompt) and
# shows both outcomes: the first candidate is accepted, the second rejected. The
# cache never fills (S = 32; 4 rounds reach 17 positions), so no round restarts it:
# round 1 has lag = 0.
ARGS=(-n 12 -k 4 -s 62 -t 1 -p "ROMEO:")

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

# --- prerequisites -------------------------------------------------------------

if ! command -v gdb >/dev/null 2>&1; then
    fail "gdb walkthrough: gdb is not installed (fix: apt-get install gdb)"
    exit 1
fi
if [[ ! -f $GDB_FILE ]]; then
    fail "gdb walkthrough: $GDB_FILE is missing"
    exit 1
fi
if [[ ! -x $RELEASE_BIN ]]; then
    fail "gdb walkthrough: $RELEASE_BIN is missing (run make)"
    exit 1
fi
# make rebuilds specdec_debug only when it is missing or older than specdec.c, so
# gdb's line numbers always match the source
if ! make -s debug >/dev/null 2>&1 || [[ ! -x $DEBUG_BIN ]]; then
    fail "gdb walkthrough: make -s debug could not build $DEBUG_BIN (run make debug to see why)"
    exit 1
fi

# --- check 0: the command file runs no code in the program ---------------------------

# gdb runs code in the inferior for `call`, for a function call inside an expression,
# and for a string given as a printf argument (it copies the string into the program's
# memory with malloc); some kernels refuse that ("Couldn't write extended state
# status: Bad address"), so the walkthrough must do none of it. A format string
# itself is fine: gdb formats it on its own side.
bad=$(grep -nE '^[[:space:]]*(call[[:space:]]|(print|p|output|set)[[:space:]].*[A-Za-z_][A-Za-z_0-9]*[[:space:]]*\()|^[[:space:]]*printf[[:space:]]+"([^"\\]|\\.)*"[[:space:]]*,.*"' "$GDB_FILE")
if [[ -z $bad ]]; then
    pass "gdb walkthrough: $GDB_FILE calls no function in the program (no call, no f(x), no string printf argument)"
else
    fail "gdb walkthrough: $GDB_FILE would make gdb run code in the program: $(head -1 <<<"$bad")"
fi

T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_gdb.XXXXXX") || { echo "FAIL gdb walkthrough: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT

# --- the two runs ----------------------------------------------------------------

timeout 120 gdb -batch -nx -x "$GDB_FILE" --args "$DEBUG_BIN" "${ARGS[@]}" </dev/null >"$T/gdb.out" 2>&1
rc=$?
if ((rc != 0)); then
    fail "gdb walkthrough: gdb -batch -x $GDB_FILE --args $DEBUG_BIN ${ARGS[*]} exited with status $rc$( ((rc == 124)) && echo ' (timed out after 120 s)')"
    awk '{ line[NR % 15] = $0 } END { for (i = NR - 14; i <= NR; i++) if (i > 0) print line[i % 15] }' "$T/gdb.out"   # its last 15 lines
    exit 1
fi
timeout 60 "$RELEASE_BIN" "${ARGS[@]}" --trace </dev/null >/dev/null 2>"$T/trace.err"
rc=$?
if ((rc != 0)); then
    fail "gdb walkthrough: $RELEASE_BIN ${ARGS[*]} --trace exited with status $rc"
    exit 1
fi

# --- reading the WALK lines --------------------------------------------------------

# walk PHASE WHEN KEY: the value of KEY=... on the first "WALK PHASE WHEN" line that
# has it (empty if there is none).
walk() {
    grep -m 1 "^WALK $1 $2 .*\b$3=" "$T/gdb.out" | sed "s/.*\b$3=\([^ ]*\).*/\1/"
}
# int_ok VALUE...: every VALUE is an integer (a missing line gives an empty one).
int_ok() {
    local v
    for v in "$@"; do [[ $v =~ ^-?[0-9]+$ ]] || return 1; done
}

# --- check 1: the breakpoints are hit in order ------------------------------------

# the phase and event of each WALK line, consecutive repeats merged
order=$(awk '$1 == "WALK" && $2 != "end" { s = $2 "." $3; if (s != last) printf "%s ", s; last = s }' "$T/gdb.out")
want="draft.enter draft.return verify.enter verify.return accept.enter accept.return accept.judge accept.emit trim.enter trim.return "
# and gdb's own "Breakpoint N, function (" lines, in order
hits=$(sed -n 's/^Breakpoint [0-9]*, \([a-z_]*\) (.*/\1/p' "$T/gdb.out" | awk '{ printf "%s ", $0 }')
want_hits="draft_tokens verify_candidates accept_reject trim_kv_cache "
if [[ $order == "$want" && $hits == "$want_hits" ]]; then
    pass "gdb walkthrough: breakpoints hit once each, in order: ${hits% }"
else
    fail "gdb walkthrough: breakpoints hit: '${hits% }' (want '${want_hits% }'); WALK lines: '${order% }'"
fi

# --- check 2: the cache lengths ----------------------------------------------------

k=$(walk draft enter k)
draft_cache_len=$(walk draft enter cache_len)
kv_before=$(walk verify enter kv_len)
lag=$(walk verify enter lag)
current=$(walk verify enter current_token)
kv_verified=$(walk verify return kv_len)
trim_kv=$(walk trim enter kv_len)
cache_before=$(walk trim enter cache_len_before)
num_accepted=$(walk trim enter num_accepted)
kv_after=$(walk trim return kv_len)
n_returned=$(walk accept return n)
rejected_at=$(walk accept return rejected_at)
allow_bonus=$(walk accept enter allow_bonus)

# all_tokens as the verify pass ran it: the lag tokens, current_token, then the guesses
all_tokens=$(sed -n 's/^WALK verify return all_tokens\[[0-9]*\]=\([0-9]*\) .*/\1/p' "$T/gdb.out" | tr '\n' ' ')
guesses=$(sed -n 's/^WALK draft return candidates\[[0-9]*\]=\([0-9]*\) .*/\1/p' "$T/gdb.out" | tr '\n' ' ')
if int_ok "$k" "$lag" "$current" "$kv_before" "$kv_verified" "$trim_kv"; then
    read -r -a run <<<"$all_tokens"
    want_tail="$current ${guesses}" # what all_tokens holds from index lag on
    if ((kv_verified == kv_before + lag + k + 1 && trim_kv == kv_verified)) &&
        ((${#run[@]} == lag + k + 1)) && [[ "${run[*]:lag} " == "$want_tail" ]]; then
        pass "gdb walkthrough: verify runs lag+k+1 tokens (lag=$lag, current_token $current, then the $k guesses) and adds as many positions: kv_len $kv_before -> $kv_verified (trim finds $trim_kv)"
    else
        fail "gdb walkthrough: verify: kv_len $kv_before -> $kv_verified with lag=$lag k=$k, want $((kv_before + lag + k + 1)); trim finds $trim_kv; all_tokens '${all_tokens% }', want ${lag} tokens then '${want_tail% }'"
    fi
else
    fail "gdb walkthrough: verify: missing numbers (k='$k' lag='$lag' current_token='$current' kv_len before='$kv_before' after='$kv_verified' at trim='$trim_kv')"
fi

if int_ok "$cache_before" "$kv_before" "$lag" "$draft_cache_len"; then
    if ((cache_before == kv_before + lag && cache_before == draft_cache_len)); then
        pass "gdb walkthrough: trim's cache_len_before=$cache_before is current_token's position: the kv_len before the verify pass ($kv_before) + lag ($lag), the cache_len draft_tokens got"
    else
        fail "gdb walkthrough: trim's cache_len_before=$cache_before, but the kv_len before the verify pass was $kv_before, lag $lag (want their sum), and draft_tokens got cache_len=$draft_cache_len"
    fi
else
    fail "gdb walkthrough: missing numbers (cache_len_before='$cache_before' kv_len before verify='$kv_before' lag='$lag' draft's cache_len='$draft_cache_len')"
fi

if int_ok "$kv_after" "$cache_before" "$num_accepted"; then
    if ((kv_after == cache_before + num_accepted)); then
        pass "gdb walkthrough: trim leaves kv_len=$kv_after = cache_len_before $cache_before + num_accepted $num_accepted"
    else
        fail "gdb walkthrough: trim leaves kv_len=$kv_after, want cache_len_before $cache_before + num_accepted $num_accepted"
    fi
else
    fail "gdb walkthrough: trim: missing numbers (kv_len after='$kv_after' cache_len_before='$cache_before' num_accepted='$num_accepted')"
fi

# accept_reject returns i+1 after rejecting candidate i, else k+1 with the bonus
# token, or k in a last round that allows no bonus
if int_ok "$num_accepted" "$n_returned" "$rejected_at" "$k" "$allow_bonus"; then
    if ((rejected_at >= 0)); then
        rule=$((rejected_at + 1)) why="rejected_at+1"
    elif ((allow_bonus)); then
        rule=$((k + 1)) why="k+1, no rejection, bonus"
    else
        rule=$k why="k, no rejection, no bonus allowed"
    fi
    if ((num_accepted == rule && n_returned == num_accepted)); then
        pass "gdb walkthrough: num_accepted=$num_accepted = $why (rejected_at=$rejected_at, k=$k), as accept_reject returned"
    else
        fail "gdb walkthrough: num_accepted=$num_accepted, accept_reject returned $n_returned, want $rule = $why (rejected_at=$rejected_at, k=$k)"
    fi
else
    fail "gdb walkthrough: missing numbers (num_accepted='$num_accepted' n='$n_returned' rejected_at='$rejected_at' k='$k' allow_bonus='$allow_bonus')"
fi

# --- check 3: the debugger agrees with the program's own trace --------------------

# round 1's first ACCEPT/REJECT line:    'N'    p=0.065 q=0.025 p/q=2.629 ...
tline=$(sed -n '/^round 1:/,/^round 2:/p' "$T/trace.err" | grep -m 1 "^    '.*' *p=[0-9.]* q=[0-9.]* ")
t_char=$(sed "s/^    \('.*'\) *p=.*/\1/" <<<"$tline")
t_p=$(sed 's/.* p=\([0-9.]*\) .*/\1/' <<<"$tline")
t_q=$(sed 's/.* q=\([0-9.]*\) .*/\1/' <<<"$tline")
g_line=$(grep -m 1 '^WALK draft return candidates\[0\]=' "$T/gdb.out")
g_char=$(sed "s/.* char=\('.*'\) q=.*/\1/" <<<"$g_line")
g_q=$(walk draft return q)
g_p=$(walk verify return 'p_target\[0\]')

if [[ -n $tline && -n $g_line ]]; then
    if [[ $g_char == "$t_char" ]]; then
        pass "gdb walkthrough: first drafted token $g_char, as in the trace"
    else
        fail "gdb walkthrough: first drafted token $g_char under gdb, $t_char in the trace"
    fi
else
    fail "gdb walkthrough: no first candidate found (trace line: '$tline', gdb line: '$g_line')"
fi
# same NAME GDB TRACE: GDB (6 decimals) rounds to TRACE (3 decimals)
same() {
    if [[ -n $2 && -n $3 ]] && awk -v a="$2" -v b="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.0005 + 1e-9) }'; then
        pass "gdb walkthrough: $1 of the first drafted token: $2 under gdb, $3 in the trace"
    else
        fail "gdb walkthrough: $1 of the first drafted token: '$2' under gdb, '$3' in the trace (want equal to 3 decimals)"
    fi
}
same p "$g_p" "$t_p"
same q "$g_q" "$t_q"

((nfail == 0)) || exit 1
exit 0
