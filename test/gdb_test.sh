#!/usr/bin/env bash
# The gdb walkthrough (test/gdb_walkthrough.gdb, explained in notes/debugging.md) run in
# batch mode on ./specdec_debug, and its numbers checked against the program's own trace.
# Run by test/run_tests.sh (so by `make test`), or directly: bash test/gdb_test.sh.
# Needs gdb, a C compiler for `make debug`, ./specdec (make) and the corpus.
#
# What it checks: that the gdb file runs no code in the program (check 0: no `call`, no
# f(x) in an expression, no string printf argument); then, for two runs (the walkthrough's
# own, whose round 1 starts at cache_len 6, and one on the default 32-character prompt,
# whose round 1 follows a REFILL at cache_len 15), from the "WALK ..." lines the gdb file
# prints for round 1:
#   1. the four breakpoints are hit, in the order draft_tokens, verify_candidates,
#      accept_reject, trim_kv_cache, each entry followed by its return;
#   2. the cache: the verify pass runs all_tokens = [current_token, c0..c(k-1)] and adds
#      k+1 positions; draft_tokens, verify_candidates and trim_kv_cache all see the same
#      cache_len (the blog's cache_len_before_verify); trim leaves cache_len +
#      num_accepted;
#   3. num_accepted (what accept_reject returned and the loop passed on) is rejected_at+1
#      after a rejection, else k+1 (k when no bonus is allowed);
#   4. the debugger agrees with round 1 of ./specdec --trace with the same arguments:
#      the round's header (current_token, cache_len, k), the guesses and their q, the
#      VERIFY positions, every judged candidate's p, q, u and verdict (to the trace's 3
#      decimals), the round's last token, and the TRIM line's two lengths; and, in the
#      second run, the REFILL line before round 1, which leaves cache_len S/2-1 = 15;
#   5. the gdb recipe in specdec.c's header, run as written there: the guesses it quotes,
#      the character it says id 46 prints, and its (K+1, V) buffer read as rows, which must
#      give the trace's p for that guess.
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
# The walkthrough's run: round 1 starts at cache_len 6 (the 6-token prompt) and shows both
# outcomes, the first candidate accepted and the second rejected.
ARGS=(-n 12 -k 4 -s 62 -t 1 -p "ROMEO:")
# The default prompt is 32 characters: the prefill fills the cache, so round 1 follows a
# REFILL and starts at cache_len 15.
ARGS_REFILL=(-n 8 -k 4 -s 62 -t 1)

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

# --- reading the WALK lines and the trace ---------------------------------------------

# walk PHASE WHEN KEY: the value of the field KEY=... on the first "WALK PHASE WHEN" line
# that has it (empty if there is none); KEY is matched whole ("cache_len" is not
# "state.cache_len").
walk() {
    awk -v ph="$1" -v when="$2" -v key="$3" '
        $1 == "WALK" && $2 == ph && $3 == when {
            for (i = 4; i <= NF; i++) if (index($i, key "=") == 1) { print substr($i, length(key) + 2); exit }
        }' "$G"
}
# int_ok VALUE...: every VALUE is an integer (a missing line gives an empty one).
int_ok() {
    local v
    for v in "$@"; do [[ $v =~ ^-?[0-9]+$ ]] || return 1; done
}
# near GDB TRACE: GDB (6 decimals) rounds to TRACE (3 decimals)
near() {
    [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.0005 + 1e-9) }'
}

# check_run NAME ARGS...: runs the walkthrough and the trace with ARGS, and checks 1-4.
check_run() {
    local name=$1 rc
    shift
    G=$T/$name.gdb R=$T/$name.trace
    local what="gdb walkthrough ($*)"
    timeout 120 gdb -batch -nx -x "$GDB_FILE" --args "$DEBUG_BIN" "$@" </dev/null >"$G" 2>&1
    rc=$?
    if ((rc != 0)); then
        fail "$what: gdb -batch -x $GDB_FILE --args $DEBUG_BIN $* exited with status $rc$( ((rc == 124)) && echo ' (timed out after 120 s)')"
        tail -n 15 "$G"
        return
    fi
    timeout 60 "$RELEASE_BIN" "$@" --trace </dev/null >/dev/null 2>"$R.all"
    rc=$?
    if ((rc != 0)); then
        fail "$what: $RELEASE_BIN $* --trace exited with status $rc"
        return
    fi
    sed -n '/^round 1:/,/^  TRIM/p' "$R.all" >"$R"

    # --- check 1: the breakpoints are hit in order
    local order want hits want_hits
    order=$(awk '$1 == "WALK" && $2 != "end" { s = $2 "." $3; if (s != last) printf "%s ", s; last = s }' "$G")
    want="draft.enter draft.return verify.enter verify.return accept.enter accept.return accept.judge accept.emit trim.enter trim.return "
    hits=$(sed -n 's/^Breakpoint [0-9]*, \([a-z_]*\) (.*/\1/p' "$G" | awk '{ printf "%s ", $0 }')
    want_hits="draft_tokens verify_candidates accept_reject trim_kv_cache "
    if [[ $order == "$want" && $hits == "$want_hits" ]]; then
        pass "$what: breakpoints hit once each, in order: ${hits% }"
    else
        fail "$what: breakpoints hit: '${hits% }' (want '${want_hits% }'); WALK lines: '${order% }'"
    fi

    # --- check 2: the cache
    local k draft_cl verify_cl current verified trim_state trim_cl num_accepted after n_ret rejected_at allow_bonus
    k=$(walk draft enter k)
    draft_cl=$(walk draft enter cache_len)
    verify_cl=$(walk verify enter cache_len)
    current=$(walk verify enter current_token)
    verified=$(walk verify return cache_len)
    trim_state=$(walk trim enter state.cache_len)
    trim_cl=$(walk trim enter cache_len)
    num_accepted=$(walk trim enter num_accepted)
    after=$(walk trim return state.cache_len)
    n_ret=$(walk accept return n)
    rejected_at=$(walk accept return rejected_at)
    allow_bonus=$(walk accept enter allow_bonus)
    local all_tokens guesses
    all_tokens=$(sed -n 's/^WALK verify return all_tokens\[[0-9]*\]=\([0-9]*\) .*/\1/p' "$G" | tr '\n' ' ')
    guesses=$(sed -n 's/^WALK draft return candidates\[[0-9]*\]=\([0-9]*\) .*/\1/p' "$G" | tr '\n' ' ')
    if int_ok "$k" "$current" "$verify_cl" "$verified" "$trim_state"; then
        if ((verified == verify_cl + k + 1 && trim_state == verified)) && [[ $all_tokens == "$current $guesses" ]]; then
            pass "$what: verify runs k+1 tokens (current_token $current, then the $k guesses) and adds as many positions: cache_len $verify_cl -> $verified (trim finds $trim_state)"
        else
            fail "$what: verify: cache_len $verify_cl -> $verified with k=$k, want $((verify_cl + k + 1)); trim finds $trim_state; all_tokens '${all_tokens% }', want '$current ${guesses% }'"
        fi
    else
        fail "$what: verify: missing numbers (k='$k' current_token='$current' cache_len before='$verify_cl' after='$verified' at trim='$trim_state')"
    fi
    if int_ok "$draft_cl" "$verify_cl" "$trim_cl"; then
        if ((draft_cl == verify_cl && trim_cl == verify_cl)); then
            pass "$what: draft_tokens, verify_candidates and trim_kv_cache see one cache_len, $trim_cl: the blog's cache_len_before_verify"
        else
            fail "$what: cache_len: draft_tokens' caller has $draft_cl, verify_candidates finds $verify_cl, trim_kv_cache gets $trim_cl (want one value)"
        fi
    else
        fail "$what: missing numbers (cache_len at draft='$draft_cl' at verify='$verify_cl' at trim='$trim_cl')"
    fi
    if int_ok "$after" "$trim_cl" "$num_accepted"; then
        if ((after == trim_cl + num_accepted)); then
            pass "$what: trim leaves state.cache_len=$after = cache_len $trim_cl + num_accepted $num_accepted"
        else
            fail "$what: trim leaves state.cache_len=$after, want cache_len $trim_cl + num_accepted $num_accepted"
        fi
    else
        fail "$what: trim: missing numbers (after='$after' cache_len='$trim_cl' num_accepted='$num_accepted')"
    fi

    # --- check 3: num_accepted
    local rule why
    if int_ok "$num_accepted" "$n_ret" "$rejected_at" "$k" "$allow_bonus"; then
        if ((rejected_at >= 0)); then
            rule=$((rejected_at + 1)) why="rejected_at+1"
        elif ((allow_bonus)); then
            rule=$((k + 1)) why="k+1, no rejection, bonus"
        else
            rule=$k why="k, no rejection, no bonus allowed"
        fi
        if ((num_accepted == rule && n_ret == num_accepted)); then
            pass "$what: num_accepted=$num_accepted = $why (rejected_at=$rejected_at, k=$k), as accept_reject returned"
        else
            fail "$what: num_accepted=$num_accepted, accept_reject returned $n_ret, want $rule = $why (rejected_at=$rejected_at, k=$k)"
        fi
    else
        fail "$what: missing numbers (num_accepted='$num_accepted' n='$n_ret' rejected_at='$rejected_at' k='$k' allow_bonus='$allow_bonus')"
    fi

    # --- check 4: the debugger agrees with round 1 of the trace
    local bad=() head g_char t_char
    head=$(grep -m 1 '^round 1:' "$R")
    g_char=$(grep -m 1 '^WALK draft enter' "$G" | sed "s/.* char=\('.*'\) cache_len=.*/\1/")
    [[ $head == "round 1: current_token $g_char, cache_len $draft_cl, k $k" ]] ||
        bad+=("header '$head', gdb: current_token $g_char, cache_len $draft_cl, k $k")
    # DRAFT: '\n' -> 'N' (q=0.0249) -> ...: each guess and its q
    local t_draft g_draft
    t_draft=$(grep -m 1 '^  DRAFT ' "$R" | grep -o "'[^ ]*' (q=[0-9.]*)" | tr '\n' ' ')
    g_draft=$(awk '/^WALK draft return candidates/ { c = $5; sub(/^char=/, "", c); q = $6; sub(/^q=/, "", q); printf "%s (q=%.4f) ", c, q }' "$G")
    [[ $t_draft == "$g_draft" ]] || bad+=("DRAFT: trace '${t_draft% }', gdb '${g_draft% }'")
    local t_pos g_pos
    t_pos=$(sed -n 's/^  VERIFY .* at positions \([0-9]*\.\.[0-9]*\)$/\1/p' "$R")
    g_pos=$(sed -n 's/^WALK verify return all_tokens.* pos=\([0-9]*\)$/\1/p' "$G" | sed -n '1p;$p' | paste -sd' ' | sed 's/ /../')
    [[ $t_pos == "$g_pos" ]] || bad+=("VERIFY positions: trace '$t_pos', gdb '$g_pos'")
    # every judged candidate: char, p, q, u, verdict
    local njudged=0 tl gl i tv gv
    while IFS= read -r tl; do
        i=$njudged
        njudged=$((njudged + 1))
        gl=$(grep -m 1 "^WALK accept judge i=$i " "$G")
        if [[ -z $gl ]]; then bad+=("candidate $i: in the trace, not under gdb"); continue; fi
        t_char=$(sed "s/^    \('.*'\) *p=.*/\1/" <<<"$tl")
        [[ $gl == *" char=$t_char p="* ]] || bad+=("candidate $i: trace $t_char, gdb '$gl'")
        for f in p q u; do
            tv=$(sed "s/.* $f=\([0-9.]*\) .*/\1/" <<<"$tl")
            gv=$(sed "s/.* $f=\([0-9.]*\) .*/\1/" <<<"$gl")
            near "$gv" "$tv" || bad+=("candidate $i: $f=$gv under gdb, $tv in the trace")
        done
        tv=$(sed -E 's/.* -> (ACCEPT|REJECT) .*/\1/' <<<"$tl") # the verdict; its sum min(p,q) after it
        [[ $tv == "${gl##* }" ]] || bad+=("candidate $i: ${gl##* } under gdb, $tv in the trace")
    done < <(grep "^    '.*' *p=[0-9.]* q=" "$R")
    (($(grep -c '^WALK accept judge' "$G") == njudged)) || bad+=("gdb judged $(grep -c '^WALK accept judge' "$G") candidates, the trace $njudged")
    # the round's last token: the trace's resample or bonus, gdb's last accepted[]
    local t_last g_last
    t_last=$(grep -m 1 -E -- '-> .*; discard|^  BONUS|^  STEP' "$R" | sed -E "s/.*-> ('[^;]*'|'.*')(, the first in id order whose .*|, drawn from p.*|;.*|, as .*)?$/\1/")
    g_last=$(grep '^WALK accept emit' "$G" | tail -n 1 | sed 's/.* char=//')
    [[ $t_last == "$g_last" ]] || bad+=("last token: trace $t_last, gdb $g_last")
    local t_trim
    t_trim=$(sed -n 's/^  TRIM    cache_len [0-9]* + [0-9]* = \([0-9]*\) -> \([0-9]*\) .*/\1 \2/p' "$R")
    [[ $t_trim == "$verified $after" ]] || bad+=("TRIM: trace 'cache_len ${t_trim/ / -> }', gdb $verified -> $after")
    if ((${#bad[@]} == 0)) && [[ -n $head ]]; then
        pass "$what: round 1 as in ./specdec --trace: $head, ${k} guesses and their q, positions $t_pos, $njudged judged (p, q, u, verdict), last token $g_last, TRIM $verified -> $after"
    else
        fail "$what: gdb and ./specdec --trace disagree on round 1: ${bad[*]:-no round 1 in the trace}"
    fi
}

check_run walk "${ARGS[@]}"

# the second run: round 1 follows the refill of a full cache, a pass of its own
check_run refill "${ARGS_REFILL[@]}"
refill_line=$(sed -n '/^REFILL /{p;q}' "$T/refill.trace.all")
before_round=$(awk '/^REFILL /{ r = NR } /^round 1:/{ print (r && r < NR) ? "yes" : "no"; exit }' "$T/refill.trace.all")
G=$T/refill.gdb
refill_cl=$(walk draft enter cache_len)
if [[ $before_round == yes && $refill_line == *"one target pass over the 15 before current_token at positions 0..14"* && $refill_cl == 15 ]]; then
    pass "gdb walkthrough (${ARGS_REFILL[*]}): round 1 follows a REFILL pass of the 15 tokens before current_token, so the four phases see cache_len 15"
else
    fail "gdb walkthrough (${ARGS_REFILL[*]}): want a REFILL line before round 1 ('$refill_line', before: $before_round) and cache_len 15 at draft_tokens (gdb: '$refill_cl')"
fi

# --- check 5: the recipe in specdec.c's header ---------------------------------------
# The header tells a reader how to stop in round 1 of the demo and what they will see: the
# guesses {46, 43, 57, 1}, 'h' for id 46 after `finish`, and a (K+1, V) buffer read as rows.
# Its commands are run as written there, and its claims checked against gdb and the trace.
hdr=$(sed -n '1,/\*\//p' specdec.c)
h_args=$(grep -A1 -- "--args $DEBUG_BIN" <<<"$hdr" | tail -n 1 | sed 's/^ \* *//')
h_break=$(grep -o "gdb -ex '[^']*'" <<<"$hdr" | head -n 1 | sed "s/gdb -ex '//; s/'$//")
h_guess=$(grep -o '(gdb) p b->candidates\[0\]@k' <<<"$hdr" | sed 's/(gdb) //')
h_want=$(grep -o 'the guesses, {[0-9, ]*}' <<<"$hdr" | sed 's/the guesses, //')
h_chars=$(grep -o "p o->vocab->chars\[[0-9]*\] prints '[^']*'" <<<"$hdr")
h_rows=$(grep -o '(gdb) p ((float(\*)\[[0-9]*\])b->target_probs)\[[0-9]*\]\[[0-9]*\]' <<<"$hdr" | sed 's/(gdb) //')
eval "h_argv=($h_args)" 2>/dev/null || h_argv=()
hg=$(ASAN_OPTIONS=detect_leaks=0 timeout 120 gdb -batch -nx -ex "$h_break" -ex run -ex "$h_guess" \
     -ex "$h_rows" -ex finish -ex "${h_chars% prints*}" --args "$DEBUG_BIN" "${h_argv[@]}" 2>&1)
"$RELEASE_BIN" --trace "${h_argv[@]}" >/dev/null 2>"$T/header.trace"
row=$(sed -E 's/.*\)\[([0-9]*)\]\[([0-9]*)\]$/\1/' <<<"$h_rows")
t_p=$(sed -n '/^round 1:/,/^round 2:/p' "$T/header.trace" | grep "^    '.*' *p=" | sed -n "$((row + 1))p" | sed -E 's/.* p=([0-9.]*) .*/\1/')
g_guess=$(grep -m 1 '^\$1 = ' <<<"$hg" | sed 's/^\$1 = //')
g_p=$(grep -m 1 '^\$2 = ' <<<"$hg" | sed 's/^\$2 = //')
g_char=$(grep -m 1 '^\$[0-9]* = [0-9]* ' <<<"$hg" | sed -E "s/.* ('.*')$/\1/")
if [[ -n $h_guess && $g_guess == "$h_want" && -n $g_p && -n $t_p ]] && near "$g_p" "$t_p" &&
   [[ $h_chars == *"prints $g_char" ]]; then
    pass "gdb walkthrough: specdec.c's header recipe ($h_break, ${h_args}) shows the guesses $g_guess, $h_chars, and $h_rows = $g_p, the trace's p=$t_p"
else
    fail "gdb walkthrough: specdec.c's header recipe drifted: guesses '$g_guess' (header says '$h_want'), '${h_chars:-no chars[] line}' (gdb: '$g_char'), '${h_rows:-no rows line}' = '$g_p' (trace p '$t_p')"
fi

((nfail == 0)) || exit 1
exit 0
