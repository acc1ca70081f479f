/*
 * test/broken.h: how a test with broken builds reports (test/run_tests.sh builds it once per
 * " * broken build: -DBREAK_X" line). Define BUG, the planted bug's name or "" in the correct
 * build, then include this after check.h.
 */

// Whether a section runs: always in the correct build; in a broken build, only a section
// whose checks must catch its bug (`catches`, bug names separated by spaces).
static int runs(const char *catches) {
    if (!BUG[0]) return 1;
    size_t n = strlen(BUG);
    for (const char *c = strstr(catches, BUG); c; c = strstr(c + 1, BUG))
        if (c[n] == ' ' || c[n] == '\0') return 1; // the whole name, not a prefix of another
    return 0;
}

// A check the correct build must pass, and the broken builds named in `catches` (separated
// by spaces) must fail (other broken builds skip it: their bug is another check's).
static void expect(const char *catches, int ok, const char *what) {
    if (!BUG[0]) {
        check(ok, "%s", what);
        return;
    }
    if (catches && runs(catches)) check(!ok, "broken build %s is caught: %s", BUG, what);
}
