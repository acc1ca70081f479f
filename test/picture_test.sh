#!/usr/bin/env bash
# The picture of the demo's round 1 (notes/round1.svg, test/picture.c), run by
# test/run_tests.sh (or directly: bash test/picture_test.sh). Four checks:
#   1. `make picture`'s command, run again into a temporary directory, draws a file
#      byte-identical to notes/round1.svg: the committed picture is what the code draws;
#   2. the picture agrees with the trace, read independently: for round 1 of
#      `./specdec --trace -n 10 -s 277 -p "To be or not to be, "` (and of seed 7, whose
#      round 1 ends in a bonus), each ACCEPT/REJECT line's token, p, q, min(1,p/q), u and
#      verdict are those of the picture's visible line for that guess, in order and no more;
#      its resample or bonus token, its RESULT and TRIM lines are the picture's; the TRIM
#      panel has as many cached, kept and dropped cells as the trace's cache_len and TRIM
#      line say; and the marked guess's bars are 100 * q and 100 * p tall;
#   3. bad inputs (no -o, an unwritable directory, -n 1, which has no round, an option of
#      ./specdec's actions) give one line on stderr and exit 1, and leave an existing -o
#      file as it was;
#   4. a planted bug: test/picture built with -DBREAK_PICTURE_SWAP draws p and q swapped,
#      and check 2 must fail on it.
# SPECDEC_BIN (run_tests.sh's sanitizer pass) traces with that build instead. One PASS/FAIL
# line per check; exit 1 if any failed.

set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }
SPECDEC=${SPECDEC_BIN:-./specdec}
PICTURE=test/picture
DEMO=(-n 10 -s 277 -p "To be or not to be, ")
if [[ ! -x $PICTURE || ! -x $SPECDEC || ! -f tinyshakespeare/input.txt ]]; then
    fail "picture: $PICTURE, $SPECDEC or the corpus is missing (run make and make data first)"
    exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/picture_test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# 1. The committed picture is what the code draws now
if ! "$PICTURE" "${DEMO[@]}" -o "$tmp/round1.svg" 2>"$tmp/err"; then
    fail "picture: test/picture ${DEMO[*]} failed: $(cat "$tmp/err")"
elif cmp -s "$tmp/round1.svg" notes/round1.svg; then
    pass "picture: notes/round1.svg is byte-identical to what test/picture draws now"
else
    fail "picture: notes/round1.svg differs from what test/picture draws now (run make picture and commit it)"
fi

# svg_lines SVG: the visible text of each <text> element, one a line, tags removed and the
# entities the picture uses decoded, runs of blanks squeezed to one
svg_lines() {
    sed -n 's/.*<text[^>]*>\(.*\)<\/text>.*/\1/p' "$1" | sed -e 's/<[^>]*>//g' \
        -e 's/&lt;/</g; s/&gt;/>/g; s/&#8805;/>=/g; s/&#8230;/.../g; s/&amp;/\&/g' | tr -s ' '
}
# fields: from lines holding a judged guess (the trace's or the picture's), one line each:
# "TOKEN p=P q=Q min=M u=U VERDICT sum=S", read by the same pattern from either side
fields() {
    sed -n -E "s/^[^']*('(\\\\.|[^'\\\\]|\\\\x[0-9a-f]{2})+')[^']* p=([0-9.]+) q=([0-9.]+) .*min\(1,p\/q\)=([0-9.]+) u=([0-9.]+) -> (ACCEPT|REJECT) sum min\(p,q\)=([0-9.]+)\$/\1 p=\3 q=\4 min=\5 u=\6 \7 sum=\8/p"
}
# crosscheck SVG TRACE: prints every way the picture disagrees with round 1 of the trace
# (nothing when they agree)
crosscheck() {
    local svg=$1 trace=$2 round1 want got
    round1=$(sed -n '/^round 1:/,/^round 2:/p' "$trace" | tr -s ' ')
    want=$(fields <<<"$round1")
    got=$(svg_lines "$svg" | grep '^guess [0-9]* ' | fields)
    [[ -n $want ]] || echo "the trace has no ACCEPT/REJECT line in round 1"
    [[ $want == "$got" ]] || # the first guess that differs, or the count
        paste -d'|' <(cat <<<"$want") <(cat <<<"$got") | awk -F'|' -v nw="$(wc -l <<<"$want")" \
            -v ng="$(wc -l <<<"$got")" '$1 != $2 { print "guess " NR ": the trace has " $1 \
            ", the picture " $2; bad = 1; exit } END { if (!bad) print nw " guesses judged in the trace, " ng " in the picture" }'

    # the round's last token: the resample or the bonus, and the RESULT line, as the trace has them
    local tail_line
    for tail_line in "$(grep -o 'resample from norm(max(0, p-q)) [^;]*' <<<"$round1")" \
                     "$(grep -o 'BONUS all .*' <<<"$round1")" \
                     "$(grep -o 'RESULT emitted .*' <<<"$round1")" \
                     "$(grep -o 'TRIM cache_len .*' <<<"$round1")"; do
        [[ -z $tail_line ]] || svg_lines "$svg" | grep -qF -- "$tail_line" ||
            echo "the picture has no line '$tail_line'"
    done
    # the TRIM panel's cells: the round's cache_len cached before it, then as many kept and
    # dropped as the trace's TRIM line says ("cache_len 20 + 5 = 25 -> 23": 20 cached, 3 kept,
    # 2 dropped)
    local cells
    cells=$(awk '/^round 1:/ { sub(/.*cache_len /, ""); c = $0 + 0 }
                 /^ TRIM cache_len/ { v = $7 + 0; k = $9 + 0 }
                 END { print c, k - c, v - k }' <<<"$round1")
    [[ $cells == "$(for kind in cached kept dropped; do grep -c "class=\"cell $kind\"" "$svg"; done | paste -sd' ')" ]] ||
        echo "the TRIM panel's cells (cached, kept, dropped) are not the trace's $cells"
    # the marked guess's bars: 100 * q and 100 * p tall, to within the rounding of both
    local heights
    heights=$(sed -n -E 's/.*class="(q|p) mark".* height="([0-9.]+)".*/\1 \2/p' "$svg" | paste -d' ' - -)
    paste -d' ' <(sed -E 's/.* p=([0-9.]+) q=([0-9.]+) .*/\1 \2/' <<<"$want") <(cat <<<"$heights") |
        awk '{ if (NF != 6 || $3 != "q" || $5 != "p" || ($4 - 100 * $2) ^ 2 > 0.0121 ||
                   ($6 - 100 * $1) ^ 2 > 0.0121)
                   print "guess " NR "'"'"'s bars are q " $4 ", p " $6 " tall, for q=" $2 " p=" $1 }'
}

# 2. The picture against the trace, for the demo and for a round 1 that ends in a bonus
for seed in 277 7; do
    args=(-n 10 -s "$seed" -p "To be or not to be, ")
    "$SPECDEC" --trace "${args[@]}" >/dev/null 2>"$tmp/trace$seed"
    if ! "$PICTURE" "${args[@]}" -o "$tmp/s$seed.svg" 2>"$tmp/err"; then
        fail "picture: test/picture ${args[*]} failed: $(cat "$tmp/err")"
        continue
    fi
    diffs=$(crosscheck "$tmp/s$seed.svg" "$tmp/trace$seed")
    ends=$(grep -c -E '^ *(resample from|BONUS)' <(sed -n '/^round 1:/,/^round 2:/p' "$tmp/trace$seed"))
    if [[ -z $diffs && $ends == 1 ]]; then
        pass "picture: -s $seed: every guess's token, p, q, min(1,p/q), u and verdict, the $(sed -n '/^round 1:/,/^round 2:/p' "$tmp/trace$seed" | grep -q BONUS && echo bonus || echo resample), the RESULT, the TRIM and its cells and the marked bars agree with $SPECDEC --trace"
    else
        fail "picture: -s $seed: the picture disagrees with $SPECDEC --trace: ${diffs:-the round has no resample or bonus line}"
    fi
done

# 3. Bad inputs: one line on stderr, exit 1, and an existing -o file left as it was
echo "keep me" >"$tmp/kept.svg"
# bad CASE_NAME WANT ARGS...: test/picture ARGS fails with one line holding WANT, exit 1
bad() {
    local name=$1 want=$2 rc
    shift 2
    "$PICTURE" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [[ $rc == 1 && $(wc -l <"$tmp/err") == 1 && $(cat "$tmp/err") == *"$want"* &&
          ! -s $tmp/out && $(cat "$tmp/kept.svg") == "keep me" && ! -e $tmp/kept.svg.tmp ]]; then
        pass "picture: $name: exit 1 and one line: $(cat "$tmp/err")"
    else
        fail "picture: $name: exit $rc, stderr '$(cat "$tmp/err")' (want one line with '$want', exit 1, $tmp/kept.svg kept)"
    fi
}
bad "no -o" "-o PATH is required" "${DEMO[@]}"
bad "-n 1, which has no round" "no round to draw" -n 1 -o "$tmp/kept.svg"
bad "an action's flag" "--trace has no use" --trace -n 10 -o "$tmp/kept.svg"
bad "a bad seed" "-s must be" -s x -o "$tmp/kept.svg"
bad "a missing corpus" "$tmp/none.txt" -i "$tmp/none.txt" -n 10 -o "$tmp/kept.svg"
mkdir "$tmp/ro"
echo "keep me" >"$tmp/ro/kept.svg"
chmod a-w "$tmp/ro"
if [[ -w $tmp/ro ]]; then # root writes anywhere: a directory that is not there instead
    bad "an unwritable directory" "cannot write the picture" "${DEMO[@]}" -o "$tmp/absent/round1.svg"
else
    bad "an unwritable directory" "cannot write the picture" "${DEMO[@]}" -o "$tmp/ro/kept.svg"
    [[ $(cat "$tmp/ro/kept.svg") == "keep me" ]] || fail "picture: the unwritable directory's file was changed"
fi
chmod u+w "$tmp/ro"

# 4. The planted bug: p and q drawn swapped must fail check 2
cc=${CC:-gcc}
if ! $cc -std=c11 -O1 -ffp-contract=off -DBREAK_PICTURE_SWAP -o "$tmp/picture_swap" test/picture.c -lm 2>"$tmp/err"; then
    fail "picture: the planted bug's build failed: $(head -3 "$tmp/err")"
elif ! "$tmp/picture_swap" "${DEMO[@]}" -o "$tmp/swap.svg" 2>"$tmp/err"; then
    fail "picture: the planted bug's build did not run: $(cat "$tmp/err")"
else
    diffs=$(crosscheck "$tmp/swap.svg" "$tmp/trace277")
    if [[ -n $diffs ]] && ! cmp -s "$tmp/swap.svg" notes/round1.svg; then
        pass "picture: expected failure (-DBREAK_PICTURE_SWAP, p and q drawn swapped): check 2 sees it: $(head -1 <<<"$diffs")"
    else
        fail "picture: bug NOT caught: -DBREAK_PICTURE_SWAP draws p and q swapped, and check 2 passes it"
    fi
fi

exit $((nfail > 0))
