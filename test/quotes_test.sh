#!/usr/bin/env bash
# Quoted source and gdb sessions test, run by test/run_tests.sh (so by `make test`), or
# directly: bash test/quotes_test.sh. Needs gdb, a C compiler for `make debug`, and
# ./specdec (make) for the quoted `bash test/gdb_test.sh`.
#
# README.md and notes/*.md quote specdec.c, and quote gdb, which prints specdec.c's line
# numbers. Every such quote must be what the file and gdb give today, so an edit that
# moves a line fails here until the notes are run again. For each document:
#
#   a. gdb's source lines: every line "N<TAB>text" (gdb prints one at each stop) must be
#      line N of specdec.c, character for character (one FAIL per session block, naming
#      its first stale line and the --replay that refreshes it).
#   b. C quotes: every line of a ```c block, with runs of blanks collapsed, must be a line
#      of specdec.c or of beyond.c (C_SRCS), or the declaration of one of their functions:
#      its signature from the return type to the "{" (or ";"), joined onto one line, with a
#      ";" after it. Quoted lines that are source lines, one after the other, must also
#      follow each other in ONE of the files (a "…" line between them allows a gap): which
#      file a run of lines comes from is decided by the file that holds them in that order.
#   c. gdb sessions: a fenced block whose shell lines ("$ ..." and their "\" continuation
#      lines) end in a gdb command, and that quotes output after it, is replayed. The
#      shell lines run again from the repository root (so a `line=$(grep -n ...)` finds
#      today's line), gdb runs with the same options and program, and every "(gdb) CMD"
#      line of the block is typed again, in order. gdb's output (stdout and stderr) must
#      match the block's lines after the command, as in docs_test.sh: a line "…" stands for
#      any number of lines, a line ending in " …" matches the start of a line. A block
#      whose first line is "$ bash test/gdb_test.sh" is run again and compared the same
#      way. How the replay stands in for a terminal:
#        - gdb gets -nx (no ~/.gdbinit), -q (no banner; the notes elide it anyway),
#          `set width 0` and `set height 0` (no wrapped lines and no pager, as in a
#          terminal wide enough for the quote), and no DEBUGINFOD_URLS (no download offer);
#        - each typed CMD becomes `-ex 'echo (gdb) CMD\n' -ex 'CMD'`, put before --args:
#          gdb runs -ex commands as typed ones (from a terminal, so `finish` says "Run till
#          exit", `continue` says "Continuing." and `return` asks), and the echo puts the
#          "(gdb) CMD" line where the quote has it; `-ex 'set confirm off' -ex quit` come
#          last, so gdb ends where the quote ends instead of reading stdin;
#        - stdin is /dev/null, so gdb answers its own questions: it prints "(y or n)
#          [answered Y; input not from terminal]" where a terminal shows the "(y or n) y"
#          the reader typed. The mask below turns the first into the second;
#        - what differs between machines and runs is masked on both sides (mask): every
#          hex number (addresses), process ids, the path of the checkout in "Starting
#          program:" and of the thread library, and trailing blanks; a gdb warning that it
#          could not turn off address randomisation (some containers forbid it) is
#          dropped. History numbers ($1, $2, ...) are compared: a session numbers its
#          values the same way every time;
#        - the sessions run four at a time, each under `timeout 120` (one takes about
#          1.2 s, nearly all of it gdb starting the sanitizer build). A FAIL names the
#          first quoted line the replay did not print.
#      A command that would make gdb run code in the program is refused, as in check 0 of
#      gdb_test.sh: `call`, a function call in an expression or a condition, a string
#      argument to printf or dprintf (gdb copies it into the program with malloc).
#   d. line numbers in prose (outside fenced blocks): "line N", "lines N, M and K",
#      "FILE.c:N" (also .h, .sh, .md, .gdb). Each must be checked: a number gdb prints
#      in a quoted session of the same document (its source lines, "file F, line N." or
#      "at F:N"), which c replays; or one that another test owns (OWNED below: the
#      README's "meets `draft_tokens` at line N", checked by test/readme_test.sh). Any
#      other is a FAIL: describe the line by its code, since numbers move.
#
# One PASS/FAIL line per check; exit 1 if any failed. A FAIL says what to run again.
#
# Environment: QUOTES_FILES overrides the documents (default: README.md notes/*.md); use
# it on an edited copy of a note to show that a stale quote fails.
#
# Also: bash test/quotes_test.sh --replay FILE:LINE replays the session block around
# LINE of FILE and prints it as the note should quote it (the "$ ..." lines, then gdb's
# output with each typed command on its "(gdb) CMD" line, nothing masked), to paste
# into the note after an edit of specdec.c; it compares nothing.

set -u
export LC_ALL=C # byte semantics for awk and sed: "…" is three bytes everywhere
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd) || exit 1
cd "$ROOT" || exit 1

REPLAY=
if [[ ${1:-} == --replay ]]; then
    REPLAY=${2:-}
    if [[ ! $REPLAY =~ ^(.+):([0-9]+)$ ]]; then
        echo "usage: bash test/quotes_test.sh [--replay FILE:LINE]" >&2
        exit 2
    fi
elif [[ -n ${SPECDEC_BIN:-} ]]; then
    # run_tests.sh's second pass (a sanitizer build): the notes and specdec.c are the same,
    # and ./specdec_debug already has the sanitizers
    echo "PASS quoted source and gdb sessions: checked in the first pass"
    exit 0
fi

SRC=specdec.c # the source gdb shows: ./specdec_debug is built from it alone
C_SRCS="specdec.c beyond.c" # the files a ```c quote may come from (check b)
DEBUG_BIN=./specdec_debug
GDB_TIMEOUT=120 # seconds per replayed session; one takes about 1.2 s (specdec_debug runs -n 12)
# the documents, globs expanded (a name that does not exist stays, and fails below)
read -r -a files <<<"${QUOTES_FILES:-README.md notes/*.md}"
files=($(for f in "${files[@]}"; do compgen -G "$f" || echo "$f"; done))

nfail=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; nfail=$((nfail + 1)); }

T=$(mktemp -d "${TMPDIR:-/tmp}/specdec_quotes.XXXXXX") || { echo "FAIL quoted source: mktemp -d failed"; exit 1; }
trap 'rm -rf "$T"' EXIT

# --- the pieces --------------------------------------------------------------------

# split_blocks FILE DIR: block i of FILE (its lines between the fences) goes to DIR/b.i,
# the line number of its first line to DIR/l.i and the fence's language ("c", "sh", or
# "") to DIR/g.i.
split_blocks() {
    mkdir -p "$2"
    awk -v dir="$2" '
        /^```/ {
            if (inb) { inb = 0; close(out); next }
            inb = 1; i++; out = dir "/b." i; printf "" > out
            print NR + 1 > (dir "/l." i); close(dir "/l." i)
            lang = substr($0, 4); sub(/[ \t].*/, "", lang); print lang > (dir "/g." i); close(dir "/g." i)
            next
        }
        inb { print > out }' "$1"
}

# mask (stdin to stdout): what legitimately differs between machines and runs (see c).
mask() {
    sed -E -e 's/0x[0-9a-fA-F]+/0xADDR/g' \
           -e 's/process [0-9]+/process PID/g' -e 's/==[0-9]+==/==PID==/g' \
           -e 's/\(y or n\) \[answered Y; input not from terminal\]/(y or n) y/' \
           -e 's/^(Starting program: ).*\/(specdec_debug)/\1DIR\/\2/' \
           -e 's/^(Using host libthread_db library ).*/\1LIB/' \
           -e 's/[[:space:]]+$//' \
           -e '/^warning: Error disabling address space randomization/d'
}

# matches EXPECTED ACTUAL: true if the actual lines match the quoted ones, with "…"
# lines as elisions (first fit) and "X …" lines as prefixes (test/quote_match.awk).
matches() {
    awk -f "$ROOT/test/quote_match.awk" "$1" "$2"
}

# session BLOCK DIR: if BLOCK is a gdb session (or the quoted `bash test/gdb_test.sh`)
# that quotes output, writes DIR/shell (its shell lines without "$ "), DIR/cmd (the last
# command, on one line, for messages), DIR/want (the quoted output), DIR/typed (the
# "(gdb) CMD" commands) and DIR/kind (gdb or test), and returns 0; else returns 1.
session() {
    local b=$1 d=$2 line cont=0 n=0 nshell=0 last=
    mkdir -p "$d"
    : >"$d/shell"
    while IFS= read -r line || [[ -n $line ]]; do
        n=$((n + 1))
        if ((cont)); then
            printf '%s\n' "$line" >>"$d/shell"
            last+=" ${line#"${line%%[![:space:]]*}"}"
        elif [[ $line == '$ '* ]]; then
            printf '%s\n' "${line#\$ }" >>"$d/shell"
            last=${line#\$ }
        else
            break
        fi
        nshell=$n
        if [[ $line == *\\ ]]; then cont=1; last=${last%\\}; else cont=0; fi
    done <"$b"
    ((nshell > 0)) || return 1
    last=$(sed -E 's/[[:space:]]+/ /g' <<<"$last")
    # an environment for the command (ASAN_OPTIONS=detect_leaks=0 gdb ...) is no part of its name
    case $(sed -E 's/^([A-Za-z_][A-Za-z_0-9]*=[^ ]* )+//' <<<"$last") in
        "gdb "*) echo gdb >"$d/kind" ;;
        "bash test/gdb_test.sh") echo test >"$d/kind" ;;
        *) return 1 ;;
    esac
    printf '%s\n' "$last" >"$d/cmd"
    tail -n +$((nshell + 1)) "$b" >"$d/want"
    [[ -s $d/want ]] || return 1 # a command to type, not a transcript
    sed -n 's/^(gdb) \(..*\)$/\1/p' "$d/want" >"$d/typed"
    return 0
}

# The gdb the replayed shell lines call (see c); written out for each replay's bash.
cat >"$T/gdb_wrapper.sh" <<'EOF'
# calls_program CMD: true if gdb would run code in the program for CMD
calls_program() {
    local c=$1 s
    case $c in run | "run "* | start | "start "* | echo | "echo "* | shell*) return 1 ;; esac
    [[ $c =~ ^[[:space:]]*call([[:space:]]|$) ]] && return 0
    s=$(sed -E 's/"([^"\\]|\\.)*"/""/g' <<<"$c") # each string emptied
    if [[ $c =~ ^[[:space:]]*d?printf[[:space:]] ]] && (($(grep -o '""' <<<"$s" | wc -l) > 1)); then
        return 0 # a string argument, besides the format
    fi
    # drop the command word, and the parentheses of `if (` and `sizeof (`
    s=$(sed -E -e 's/^[[:space:]]*[A-Za-z-]+//' -e 's/(^|[^A-Za-z_0-9$])(if|sizeof)[[:space:]]*\(/\1\2 [/g' <<<"$s")
    grep -qE '(^|[^$A-Za-z_0-9])[A-Za-z_][A-Za-z_0-9]*[[:space:]]*\(' <<<"$s"
}
gdb() {
    local a prev= pre=() post=() typed=() cmd seen=0
    for a in "$@"; do
        if ((seen)) || [[ $a == --args ]]; then seen=1; post+=("$a"); else pre+=("$a"); fi
    done
    for a in "${pre[@]}"; do
        if [[ $prev == -ex || $prev == -iex || $prev == --eval-command ]] && calls_program "$a"; then
            echo "QUOTES-REFUSED: -ex '$a' would make gdb run code in the program"
            return 99
        fi
        prev=$a
    done
    while IFS= read -r cmd; do
        if calls_program "$cmd"; then
            echo "QUOTES-REFUSED: (gdb) $cmd would make gdb run code in the program"
            return 99
        fi
        typed+=(-ex "echo (gdb) ${cmd//\\/\\\\}\\n" -ex "$cmd")
    done <"$QUOTES_TYPED"
    env -u DEBUGINFOD_URLS gdb -nx -q -iex 'set width 0' -iex 'set height 0' "${pre[@]}" \
        "${typed[@]}" -ex 'set confirm off' -ex quit "${post[@]}"
}
EOF

# replay DIR: runs the session of DIR (see session) into DIR/got; DIR/rc is its status.
replay() {
    local d=$1
    if [[ $(cat "$d/kind") == test ]]; then
        timeout $((GDB_TIMEOUT * 2)) bash test/gdb_test.sh </dev/null >"$d/got" 2>&1
    else
        { echo "QUOTES_TYPED='$d/typed'"; echo "source '$T/gdb_wrapper.sh'"; cat "$d/shell"; } >"$d/run.sh"
        timeout "$GDB_TIMEOUT" bash "$d/run.sh" </dev/null >"$d/got" 2>&1
    fi
    echo $? >"$d/rc"
}

# --- prerequisites -------------------------------------------------------------------

if ! command -v gdb >/dev/null 2>&1; then
    fail "gdb sessions: gdb is not installed (fix: apt-get install gdb)"
    exit 1
fi
# make rebuilds specdec_debug only when it is missing or older than specdec.c, so gdb's
# line numbers always match the source
if ! make -s debug >/dev/null 2>&1 || [[ ! -x $DEBUG_BIN ]]; then
    fail "gdb sessions: make -s debug could not build $DEBUG_BIN (run make debug to see why)"
    exit 1
fi

# --- --replay FILE:LINE --------------------------------------------------------------

if [[ -n $REPLAY ]]; then
    rfile=${BASH_REMATCH[1]} rline=${BASH_REMATCH[2]}
    [[ -f $rfile ]] || { echo "quotes_test: $rfile: no such file" >&2; exit 2; }
    split_blocks "$rfile" "$T/r"
    for b in "$T"/r/b.*; do
        [[ -e $b ]] || continue
        first=$(cat "${b/b./l.}")
        last=$((first + $(wc -l <"$b") - 1))
        ((rline >= first - 1 && rline <= last + 1)) || continue
        if ! session "$b" "$T/r/s"; then
            echo "quotes_test: the block at $rfile:$first is not a quoted gdb session" >&2
            exit 2
        fi
        replay "$T/r/s"
        awk '{ print (prev ~ /\\$/ ? "" : "$ ") $0; prev = $0 }' "$T/r/s/shell"
        cat "$T/r/s/got"
        exit 0
    done
    echo "quotes_test: no fenced block around $rfile:$rline" >&2
    exit 2
fi

# blocks DIR PREFIX: DIR/PREFIX.1, DIR/PREFIX.2, ... in the order of the document
blocks() {
    local i=1
    while [[ -e $1/$2.$i ]]; do echo "$1/$2.$i"; i=$((i + 1)); done
}

# --- the documents --------------------------------------------------------------------

nsessions=0
for f in "${files[@]}"; do
    [[ -f $f ]] || { fail "quoted source: $f is missing"; continue; }
    key=$(tr '/.' '__' <<<"$f")
    split_blocks "$f" "$T/$key"
    for b in $(blocks "$T/$key" b); do
        i=${b##*.}
        if session "$b" "$T/$key/s.$i"; then
            nsessions=$((nsessions + 1))
            # the replays run in the background, four at a time
            while (($(jobs -rp | wc -l) >= 4)); do wait -n; done
            replay "$T/$key/s.$i" &
        else
            rm -rf "$T/$key/s.$i"
        fi
    done
done

# where DOC LINE: the session block of DOC that holds LINE, as "DOC:FIRST", or empty.
where() {
    local key b first last
    key=$(tr '/.' '__' <<<"$1")
    for b in $(blocks "$T/$key" b); do
        [[ -d $T/$key/s.${b##*.} ]] || continue
        first=$(cat "${b/b./l.}")
        last=$((first + $(wc -l <"$b") - 1))
        if (($2 >= first && $2 <= last)); then echo "$1:$first"; return; fi
    done
}

# --- a. gdb's source lines -------------------------------------------------------------

for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    out=$(awk -F'\t' -v src="$SRC" '
        BEGIN { while ((getline l < src) > 0) line[++n] = l }
        /^[0-9]+\t/ {
            k++; N = $1 + 0; text = substr($0, length($1) + 2)
            if (!(N in line)) print FNR "\t" N "\t" text "\t(" src " has " n " lines)"
            else if (line[N] != text) print FNR "\t" N "\t" text "\t" line[N]
        }
        END { print "COUNT\t" k + 0 }' "$f")
    count=$(sed -n 's/^COUNT\t//p' <<<"$out")
    bad=$(grep -v '^COUNT' <<<"$out")
    if [[ -n $bad ]]; then
        # one FAIL per session block (or for the lines outside any), naming its first
        # stale line
        declare -A seen=() more=()
        order=()
        while IFS=$'\t' read -r at N text now; do
            s=$(where "$f" "$at")
            s=${s:-none}
            if [[ -n ${seen[$s]:-} ]]; then more[$s]=$((${more[$s]:-0} + 1)); continue; fi
            order+=("$s")
            seen[$s]="$f:$at: gdb's line $N reads '$text', but $SRC:$N is '$now'"
        done <<<"$bad"
        for s in "${order[@]}"; do
            msg="quoted source: ${seen[$s]}"
            ((${more[$s]:-0})) && msg+=", and ${more[$s]} more stale line(s)"
            if [[ $s == none ]]; then
                msg+=" (copy the lines from $SRC again)"
            else
                msg+=" in the session at $s (run it again: bash test/quotes_test.sh --replay $s, and paste its output)"
            fi
            fail "$msg"
        done
        unset seen more
    elif ((count > 0)); then
        pass "quoted source: $f: its $count gdb source lines (N<TAB>text) are lines of $SRC, word for word"
    fi
done

# --- b. C quotes ------------------------------------------------------------------------

for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    key=$(tr '/.' '__' <<<"$f")
    for b in $(blocks "$T/$key" b); do
        [[ $(cat "${b/b./g.}") == c ]] || continue
        first=$(cat "${b/b./l.}")
        out=$(awk -v srcs="$C_SRCS" -v first="$first" '
            function norm(s) { gsub(/[ \t]+/, " ", s); sub(/^ /, "", s); sub(/ $/, "", s); return s }
            function parens(s) { gsub(/\( /, "(", s); gsub(/ \)/, ")", s); return s }
            BEGIN {
                # the files one after the other, each followed by a line no quote can match, so
                # a run of quoted lines never continues from one file into the next
                nf = split(srcs, file, " ")
                for (f = 1; f <= nf; f++) {
                    while ((getline l < file[f]) > 0) { raw[++n] = l; nl[n] = norm(l); from[n] = f; at[nl[n]] = at[nl[n]] " " n }
                    raw[++n] = ""; nl[n] = "\001"; from[n] = f
                }
                # a declaration starts at column 0 with a name and has "(": join its lines
                # up to the "{" of a definition or the ";" of a prototype
                for (i = 1; i <= n; i++) {
                    if (raw[i] !~ /^[A-Za-z_]/ || raw[i] !~ /\(/ || raw[i] ~ /^(typedef|struct|enum|union)[ \t{]/) continue
                    s = ""
                    for (j = i; j <= n && j < i + 8; j++) {
                        t = raw[j]; sub(/[ \t]*\/\/.*$/, "", t); s = s " " t
                        if (t ~ /[{;][ \t]*$/) break
                    }
                    s = parens(norm(s)); sub(/ *[{;]$/, "", s); decl[s] = 1
                }
            }
            {
                q = norm($0); ln = first + NR - 1
                if (q == "" || q == "…") { settle(); run = 0; next }
                d = q; if (sub(/;$/, "", d) && (parens(d) in decl)) { settle(); ndecl++; run = 0; next }
                if (!(q in at)) { settle(); print "BAD\t" ln "\t" $0; run = 0; next }
                nsrc++
                if (!run) { settle(); delete cand; split(substr(at[q], 2), c, " "); for (x in c) cand[c[x]] = 1; run = 1; next }
                # the run goes on: keep the starts where this line comes next in the file
                ok = 0
                for (p in cand) if (nl[p + run] == q) ok = 1; else delete cand[p]
                if (!ok) { print "GAP\t" ln "\t" $0; run = 0; next } # (cand is empty: nothing to settle)
                run++
            }
            # settle: the file(s) that hold the run just ended, named once for the PASS line
            function settle(   p, f) {
                if (!run) return
                for (p in cand) used[file[from[p]]] = 1
            }
            END {
                settle(); names = ""
                for (f = 1; f <= nf; f++) if (file[f] in used) names = names (names == "" ? "" : " and ") file[f]
                print "COUNT\t" nsrc + 0 "\t" ndecl + 0 "\t" (names == "" ? "none" : names)
            }' "$b")
        IFS=$'\t' read -r _ nsrc ndecl infiles < <(grep '^COUNT' <<<"$out")
        bad=$(grep -v '^COUNT' <<<"$out")
        if [[ -z $bad ]]; then
            pass "quoted source: $f:$first: a C quote of $nsrc source lines ($([[ $infiles == none ]] && echo "none" || echo "from $infiles, in order")) and $ndecl declarations, all in ${C_SRCS// / or }"
        else
            while IFS=$'\t' read -r what ln text; do
                if [[ $what == BAD ]]; then
                    fail "quoted source: $f:$ln: '$(sed -E 's/^[[:space:]]+//' <<<"$text")' is no line of ${C_SRCS// / or } and no declaration in them (copy it from the file again)"
                else
                    fail "quoted source: $f:$ln: '$(sed -E 's/^[[:space:]]+//' <<<"$text")' does not follow the quoted line above it in ${C_SRCS// / or } (copy the lines again, or put a … line between them)"
                fi
            done <<<"$bad"
        fi
    done
done

# --- c. gdb sessions, replayed ------------------------------------------------------------

wait
for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    key=$(tr '/.' '__' <<<"$f")
    for b in $(blocks "$T/$key" b); do
        i=${b##*.}
        d=$T/$key/s.$i
        [[ -d $d ]] || continue
        first=$(cat "$T/$key/l.$i")
        cmd=$(cat "$d/cmd")
        ((${#cmd} > 100)) && cmd="${cmd:0:97}..."
        rc=$(cat "$d/rc")
        again="bash test/quotes_test.sh --replay $f:$first"
        refused=$(grep -m 1 '^QUOTES-REFUSED: ' "$d/got")
        if [[ -n $refused ]]; then
            fail "gdb sessions: $f:$first: ${refused#QUOTES-REFUSED: } (see check 0 of test/gdb_test.sh)"
            continue
        fi
        if ((rc == 124)); then
            fail "gdb sessions: $f:$first: $cmd timed out (run it again: $again)"
            continue
        fi
        mask <"$d/want" >"$d/want.m"
        mask <"$d/got" >"$d/got.m"
        if matches "$d/want.m" "$d/got.m"; then
            pass "gdb sessions: $f:$first: $cmd ($(grep -c . "$d/want") lines as quoted, $(grep -c '^(gdb) ' "$d/want") typed commands replayed)"
        else
            # the first quoted line the replay does not print, to show what drifted
            firstbad=$(grep -vxF -f "$d/got.m" "$d/want.m" | grep -vx '…' | head -n 1)
            fail "gdb sessions: $f:$first: $cmd no longer prints what is quoted (first line not found: '${firstbad:-order or count differs}'; run it again with $again and paste its output into the block)"
        fi
    done
done
if [[ " ${files[*]} " == *" notes/debugging.md "* ]] && ! compgen -G "$T/notes_debugging_md/s.*" >/dev/null; then
    fail "gdb sessions: notes/debugging.md quotes no gdb session (\"\$ gdb ...\" and its output in one block)"
fi

# --- d. line numbers in prose ---------------------------------------------------------------

# OWNED: prose line numbers another test checks (an ERE on the prose line, and the test).
OWNED_RE=('meets `draft_tokens` at line [0-9]+')
OWNED_BY=('test/readme_test.sh')

nmention=0
nshown=0
owned=()
dfail_before=$nfail
for f in "${files[@]}"; do
    [[ -f $f ]] || continue
    key=$(tr '/.' '__' <<<"$f")
    # the line numbers gdb prints in this document's replayed sessions
    printed=" "
    for b in $(blocks "$T/$key" b); do
        d=$T/$key/s.${b##*.}
        [[ -d $d ]] || continue
        printed+=$(sed -n -E -e 's/^([0-9]+)\t.*/\1/p' -e 's/.*, line ([0-9]+)\..*/\1/p' \
                         -e 's/.* at [A-Za-z0-9_./-]+:([0-9]+)$/\1/p' "$d/want" | tr '\n' ' ')
    done
    while IFS=$'\t' read -r ln mention; do
        [[ -n $ln ]] || continue
        nmention=$((nmention + 1))
        text=$(sed -n "${ln}p" "$f")
        by=
        for ((o = 0; o < ${#OWNED_RE[@]}; o++)); do
            [[ $text =~ ${OWNED_RE[o]} ]] && by=${OWNED_BY[o]}
        done
        if [[ -n $by ]]; then
            owned+=("$f:$ln '$mention' ($by)")
            continue
        fi
        unchecked=
        nshown=$((nshown + 1))
        for N in $(grep -oE '[0-9]+' <<<"${mention#*:}"); do
            [[ $printed == *" $N "* ]] || unchecked+=" $N"
        done
        if [[ -n $unchecked ]]; then
            fail "line numbers in prose: $f:$ln: '$mention': no test checks line$unchecked (describe the line by its code, since numbers move, or show it in a quoted gdb session of $f)"
        fi
    done < <(awk '
        /^```/ { inb = !inb; next }
        inb { next }
        {
            s = $0
            while (match(s, /([Ll]ines? [0-9]+(( ?, ?| and | to | ?– ?|\.\.)[0-9]+)*|[A-Za-z0-9_.\/-]+\.(c|h|sh|md|gdb):[0-9]+)/)) {
                print FNR "\t" substr(s, RSTART, RLENGTH)
                s = substr(s, RSTART + RLENGTH)
            }
        }' "$f")
done
if ((nfail == dfail_before)); then
    msg="line numbers in prose: $nmention in ${#files[@]} documents; $nshown shown by gdb in a replayed session of the same document"
    msg+=", ${#owned[@]} checked by another test${owned:+: ${owned[*]}}"
    pass "$msg"
fi

((nfail == 0)) || exit 1
exit 0
