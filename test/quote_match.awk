# test/quote_match.awk: awk -f test/quote_match.awk WANT GOT exits 0 when the lines of GOT
# match the quoted lines of WANT. A quoted line that is just "…" stands for any number of
# lines (an elision, first fit); a quoted line ending in " …" must match the start of a
# line; every other quoted line must equal its line. test/docs_test.sh and
# test/quotes_test.sh both compare a note's quote with a command's output this way.
NR == FNR { want[++m] = $0; next }
{ got[++n] = $0 }
# eq(w, g): quoted line w matches output line g
function eq(w, g,   p) {
    if (w ~ / …$/) {
        p = substr(w, 1, length(w) - 4)
        return substr(g, 1, length(p)) == p
    }
    return w == g
}
# fits(i, j): want[i..m] matches got[j..n]
function fits(i, j,   k) {
    if (i > m) return j > n
    if (want[i] == "…") {
        for (k = j; k <= n + 1; k++) if (fits(i + 1, k)) return 1
        return 0
    }
    return j <= n && eq(want[i], got[j]) && fits(i + 1, j + 1)
}
END { exit !fits(1, 1) }
