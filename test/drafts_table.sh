#!/usr/bin/env bash
# Every draft of ./beyond side by side, on one command: a markdown table for notes/speed.md.
#
#   bash test/drafts_table.sh        (or make drafts-table, which builds ./beyond first)
#
# What it measures: for each draft (bigram, lookup, gpt, medusa, early-exit,
# early-exit-untrained, eagle, cascade), on the shipped model (0.84 MB of weights) and on
# the same model padded to 136 MB with --ffn-width 65536 (the same text, but memory-bound),
#   ./beyond --compare -t 1 -n 400 -k 4 -p 'To be or not to be, that is the ' --draft D -s S
# for the seeds S = 1, 2, 3, and from each run's stderr:
#   - alpha, tokens per verify pass and target passes (the speculative run's stats);
#   - the draft's cost per guess, in one-token target passes: the speculative run's
#     "drafting" ms over the guesses it drafted, divided by the plain run's mean
#     one-token step (its "one-token step" ms over its passes), both from the same run;
#   - wall time against plain decoding: the comparison's "wall time (ms)" spec/plain.
# Each cell is the median of the three seeds (the wall-time ratio also shows min-max).
# Why: the drafts differ in two things, how often they are right (alpha) and what a guess
# costs, and which one matters depends on what a target pass costs; one table on one
# command, in both regimes, shows the trade without mixing settings. The prompt is
# ./beyond's default, 32 characters, long enough for lookup (which needs more than 3).
#
# A draft whose trained file does not exist yet (early-exit: tinyshakespeare/exit.bin,
# eagle: tinyshakespeare/eagle.bin) gets a row saying so. Anything else that goes wrong
# (no ./beyond, a run that fails, a number that cannot be read) stops the script with one
# line on stderr and exit 1. Not part of make test: it measures, it does not check.
# About 8 minutes on a busy 2-core machine with all eight drafts (5 to 6 without exit.bin and eagle.bin),
# nearly all of it in the 136 MB runs (20 s each); the shipped model's rows take 2 s.

set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

ME=test/drafts_table.sh
PROMPT='To be or not to be, that is the '
DRAFTS=(bigram lookup gpt medusa early-exit early-exit-untrained eagle cascade)
SEEDS=(1 2 3)
WIDE=65536
COMMAND=(./beyond --compare -t 1 -n 400 -k 4 -p "$PROMPT")
T=$(mktemp -d "${TMPDIR:-/tmp}/drafts_table.XXXXXX")
trap 'rm -rf "$T"' EXIT

# die MESSAGE: the one line on stderr, then exit 1
die() {
    echo "$ME: $*" >&2
    exit 1
}

# trained_file DRAFT: the file a draft loads that may not be trained yet (else nothing)
trained_file() {
    case $1 in
        early-exit) echo tinyshakespeare/exit.bin ;;
        eagle) echo tinyshakespeare/eagle.bin ;;
    esac
}

# shown ARGS...: the command as one line to paste, the prompt in single quotes
shown() {
    local out="" arg
    for arg in "$@"; do
        if [[ $arg == "$PROMPT" ]]; then out+=" '$arg'"; else out+=" $arg"; fi
    done
    echo "${out# }"
}

# parse STDERR_FILE: print "alpha tokens_per_pass target_passes cost_per_guess spec/plain"
# from one --compare run, or fail naming the line it could not read. The sections are
# told apart by their headings, since "drafting" and "one-token step" appear in several.
parse() {
    awk '
        /^speculative decoding$/ { sec = "spec" }
        /^plain decoding$/ { sec = "plain" }
        /^comparison / { sec = "compare" }
        sec == "spec" && $1 == "alpha" { alpha = $2 }
        sec == "spec" && $1 == "tokens" && $2 == "per" && $3 == "verify" { tpp = $5 }
        sec == "spec" && $1 == "target" && $2 == "passes" { passes = $3 }
        sec == "spec" && $1 == "drafting" && NF >= 5 { guesses = $3; draft_ms = $4 }
        sec == "plain" && $1 == "one-token" && $2 == "step" { steps = $3; step_ms = $5 }
        sec == "compare" && $1 == "wall" && $2 == "time" && $3 == "(ms)" { ratio = $6 }
        # number(X, WHAT): X if it is a plain non-negative number, else fail naming WHAT
        function number(x, what) {
            if (x !~ /^[0-9]+(\.[0-9]+)?$/) {
                printf "cannot read %s (got \"%s\")\n", what, x > "/dev/stderr"
                exit 1
            }
            return x
        }
        END {
            number(alpha, "the speculative run'\''s alpha")
            number(tpp, "the speculative run'\''s tokens per verify pass")
            number(passes, "the speculative run'\''s target passes")
            number(guesses, "the speculative run'\''s drafting row (guesses)")
            number(draft_ms, "the speculative run'\''s drafting row (ms)")
            number(steps, "the plain run'\''s one-token step row (passes)")
            number(step_ms, "the plain run'\''s one-token step row (ms)")
            number(ratio, "the comparison'\''s wall time spec/plain")
            if (steps == 0 || step_ms == 0) {
                print "the plain run made no timed one-token step" > "/dev/stderr"
                exit 1
            }
            # a draft that guessed nothing has no cost per guess: "-"
            cost = guesses > 0 ? (draft_ms / guesses) / (step_ms / steps) : "-"
            print alpha, tpp, passes, cost, ratio
        }' "$1"
}

# medians: read one "alpha tpp passes cost ratio" line per seed, print the table's cells
# (each column's median; "-" values are skipped; the ratio also gets its min-max)
medians() {
    awk '
        { for (c = 1; c <= NF; c++) if ($c != "-") v[c, ++n[c]] = $c }
        # sorted(C): sort column C of every seed in place (insertion sort: three values)
        function sorted(c,   i, j, x) {
            for (i = 2; i <= n[c]; i++) {
                x = v[c, i]
                for (j = i - 1; j >= 1 && v[c, j] + 0 > x + 0; j--) v[c, j + 1] = v[c, j]
                v[c, j + 1] = x
            }
        }
        # median(C): the middle value of column C (the mean of the middle two if even)
        function median(c,   m) {
            if (n[c] == 0) return "-"
            sorted(c)
            m = int((n[c] + 1) / 2)
            return n[c] % 2 ? v[c, m] : (v[c, m] + v[c, m + 1]) / 2
        }
        # two_digits(X): X to two significant digits, written without an exponent
        function two_digits(x,   d) {
            if (x == "-" || x == 0) return x
            d = 1 - int(log(x) / log(10) + (x < 1 ? -0.999999 : 0))
            if (d < 0) d = 0
            return sprintf("%." d "f", x)
        }
        END {
            cost = two_digits(median(4))
            ratio = median(5) # sorts column 5: its min and max are then v[5, 1] and v[5, n[5]]
            printf "%.3f | %.2f | %d | %s | %.2f (%.2f–%.2f)\n", median(1), median(2), median(3), cost, ratio, v[5, 1], v[5, n[5]]
        }'
}

# run_row DRAFT WIDTH: run the draft on every seed (WIDTH 0: the shipped model) and print
# its table row; the command goes to stdout as it runs, with its time
run_row() {
    local draft=$1 width=$2 weights="0.84 MB" seed rc file start
    local cmd=("${COMMAND[@]}" --draft "$draft")
    if ((width > 0)); then
        cmd+=(--ffn-width "$width")
        weights="136 MB"
    fi
    file=$(trained_file "$draft")
    if [[ -n $file && ! -e $file ]]; then
        echo "    $(shown "${cmd[@]}") -s SEED   (not run: no $file)"
        echo "| $draft | $weights | (no $file) | | | | |" >>"$T/table"
        return
    fi
    start=$EPOCHREALTIME
    : >"$T/seeds"
    for seed in "${SEEDS[@]}"; do
        rc=0
        "${cmd[@]}" -s "$seed" >/dev/null 2>"$T/err" || rc=$?
        ((rc == 0)) || die "$(shown "${cmd[@]}") -s $seed failed (exit $rc): $(tail -n 1 "$T/err")"
        parse "$T/err" >>"$T/seeds" 2>"$T/why" ||
            die "$(shown "${cmd[@]}") -s $seed: $(head -n 1 "$T/why")"
    done
    echo "    $(shown "${cmd[@]}") -s SEED   ($(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s)"
    echo "| $draft | $weights | $(medians <"$T/seeds") |" >>"$T/table"
}

# header: the machine, the date and the commit the table was measured on
header() {
    local cpu commit
    cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || true)
    if commit=$(git rev-parse --short HEAD 2>/dev/null); then
        [[ -z $(git status --porcelain --untracked-files=no) ]] || commit+=" with uncommitted changes"
    else
        commit="unknown (not a git checkout)"
    fi
    echo "## Every draft on one command ($ME)"
    echo
    echo "machine: $(uname -m), $(nproc) cores, ${cpu:-unknown CPU (no model name in /proc/cpuinfo)}"
    echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "commit:  $commit"
}

[[ -x ./beyond ]] || die "./beyond is missing (make beyond builds it)"
total=$EPOCHREALTIME
header
echo
echo "commands, each run with -s 1, -s 2 and -s 3:"
: >"$T/table"
for width in 0 "$WIDE"; do
    for draft in "${DRAFTS[@]}"; do
        run_row "$draft" "$width"
    done
done
echo
echo "Every draft at t = 1, 400 tokens, a chain of K = 4, on the prompt \"$PROMPT\""
echo "(./beyond's default); each cell the median of seeds 1, 2, 3. 136 MB: --ffn-width $WIDE, the same text."
echo "Draft cost per guess: the drafting ms over the guesses drafted, in the plain run's mean"
echo "one-token step. Wall time: speculative over plain, the same run's comparison (min–max)."
echo
echo "| draft | weights | α | tokens per verify pass | target passes | draft cost per guess (one-token passes) | wall time, speculative / plain |"
echo "|---|---|---|---|---|---|---|"
cat "$T/table"
echo
echo "($(awk -v a="$total" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s in all)"
