/*
 * test/explain.c — one position of accept/reject, worked out exactly (make explain).
 *
 * The example of Aakash Kumar Nain's "Speculative Decoding - The Bits and the Bytes!": a draft q and a target p over four tokens A, B, C, D.
 * For each token it prints the exact chance of being emitted, min(p, q) (drafted and
 * accepted) + P(reject) * residual (rejected, then drawn from norm(max(0, p - q))), which
 * is p, beside its frequency in 200,000 runs of specdec.c's real draft_tokens and
 * accept_reject; then the same rows greedy (t = 0). notes/math.md derives it.
 * test/test_exact.c includes this file (with TESTING defined), after specdec.c or
 * beyond.c: then this file includes nothing, and its draft_tokens and accept_reject are
 * that build's (a broken build's mutants too).
 *
 *   test/explain        # the table, on stderr
 */
#ifndef TESTING
#define TESTING      // leaves out specdec.c's main: this file has its own ...
#define EXPLAIN_MAIN // ... unless a test includes this file (with TESTING defined)
#include "../specdec.c" // (a test includes specdec.c or beyond.c itself, first)
#endif

// ----------------------------------------------------------------------------
// One position's accept/reject: exactly, and by running the real phases

// Nain's example ("Why do we sample from the adjusted distribution?"): a draft q and
// a target p over four tokens A, B, C, D.
#define EXPLAIN_V 4
#define EXPLAIN_ROUNDS 200000
static const char EXPLAIN_NAMES[EXPLAIN_V] = {'A', 'B', 'C', 'D'};
static const float EXPLAIN_Q[EXPLAIN_V] = {0.10f, 0.60f, 0.20f, 0.10f};
static const float EXPLAIN_P[EXPLAIN_V] = {0.05f, 0.10f, 0.60f, 0.25f};

// What one position does with draft row q and target row p (V each, V <= EXPLAIN_V):
// exact[x] = P(x is emitted) = min(p, q)[x] (drafted and accepted) + P(reject) *
// residual[x] (rejected, then drawn from norm(max(0, p - q))), and *beta = sum min(p, q),
// the chance the draft's token is accepted. Then the same position run `rounds` times
// through the real draft_tokens and accept_reject (k = 1, no bonus), from a draft table
// whose every row is q: counts[x] = times x was emitted, *n_accepted = times the draft's
// token passed. At temperature 0 both rows become one-hot, as tempered_bigram and
// tempered_softmax make them. With f non-NULL, prints the table.
void explain_position(FILE *f, const char *title, const float *q, const float *p,
                      const char *names, int V, float temperature, long rounds, uint64_t seed,
                      double *exact, double *beta, long *counts, long *n_accepted) {
    // the rows the decision uses: the draft's through a real draft table, p as the
    // target's softmax would give it at this temperature
    float table[EXPLAIN_V * EXPLAIN_V], q_used[EXPLAIN_V], p_used[EXPLAIN_V];
    for (int a = 0; a < V; a++) memcpy(table + a * V, q, (size_t)V * sizeof(float));
    BigramDraft d = {V, table};
    tempered_bigram(q_used, &d, 0, temperature);
    if (temperature == 0.0f) one_hot(p_used, V, argmax(p, V));
    else memcpy(p_used, p, (size_t)V * sizeof(float));
    // 1. exactly: the accept path and the residual path, in double precision
    double b = 0.0, mass = 0.0, resid[EXPLAIN_V];
    for (int x = 0; x < V; x++) {
        b += fmin(p_used[x], q_used[x]);
        resid[x] = fmax(0.0, (double)p_used[x] - q_used[x]);
        mass += resid[x];
    }
    for (int x = 0; x < V; x++)
        exact[x] = fmin(p_used[x], q_used[x]) + (mass > 0.0 ? (1.0 - b) * resid[x] / mass : 0.0);
    *beta = b;
    // 2. by sampling: the draft proposes, accept_reject decides (k = 1, no bonus)
    Rng rng;
    rng_seed(&rng, seed);
    int cand[1] = {0}, all_tokens[2], out[2];
    float draft_probs[EXPLAIN_V], p_target[2 * EXPLAIN_V];
    double u[1], residual[EXPLAIN_V];
    SpecBuffers buf = {.V = V, .candidates = cand, .draft_probs = draft_probs, // the round's
                       .all_tokens = all_tokens, .target_probs = p_target, .u = u,
                       .adjusted = residual, .emitted = out};
    memcpy(p_target, p_used, (size_t)V * sizeof(float));
    memcpy(p_target + V, p_used, (size_t)V * sizeof(float)); // the bonus row, never used
    for (int x = 0; x < V; x++) counts[x] = 0;
    *n_accepted = 0;
    for (long r = 0; r < rounds; r++) {
        draft_tokens(&d, 0, 1, temperature, &rng, &buf); // after token 0, the current token
        accept_reject(&buf, 1, 0, &rng);
        counts[out[0]]++;
        *n_accepted += buf.rejected_at < 0;
    }
    if (!f) return;
    // 3. the table, with each measured frequency's distance from exact in standard errors
    fprintf(f, "\n%s (t = %g)\n", title, temperature);
    fprintf(f, "  token     q      p   min(p,q)  max(0,p-q)  residual   P(emit) exact   "
            "measured in %ld rounds\n", rounds);
    for (int x = 0; x < V; x++) {
        double freq = (double)counts[x] / rounds;
        double se = sqrt(exact[x] * (1.0 - exact[x]) / rounds);
        fprintf(f, "  %c     %.3f  %.3f     %.3f       %.3f     %.3f    %.4f (p %.4f)  "
                "%.4f", names[x], q_used[x], p_used[x], fmin(p_used[x], q_used[x]), resid[x],
                mass > 0.0 ? resid[x] / mass : 0.0, exact[x], p_used[x], freq);
        if (se > 0.0) fprintf(f, "  (%+.1f se)\n", (freq - exact[x]) / se);
        else fprintf(f, "\n");
    }
    double acc = (double)*n_accepted / rounds;
    fprintf(f, "  acceptance = sum min(p, q) = %.4f; measured %.4f", b, acc);
    if (b > 0.0 && b < 1.0) fprintf(f, " (%+.1f se)\n", (acc - b) / sqrt(b * (1.0 - b) / rounds));
    else fprintf(f, "\n");
    fprintf(f, "  rejection  = sum max(0, p - q) = %.4f, spread over the residual\n", mass);
}


// ----------------------------------------------------------------------------
// The command line

#ifdef EXPLAIN_MAIN
// test/explain: Nain's table at t = 1 and t = 0, exact beside measured.
int main(int argc, char **argv) {
    program_name = "explain"; // its messages' first word
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        printf("usage: test/explain\n  Nain's A/B/C/D example: the exact chance of each "
               "token beside %d runs\n  of draft_tokens + accept_reject, at t = 1 and t = 0 "
               "(see test/explain.c)\n", EXPLAIN_ROUNDS);
        return close_stdout(); // a failed write of the usage is one line and exit 1
    }
    if (argc > 1) {
        error_line("explain takes no options, got '%s' (it prints Nain's table; see "
                   "test/explain.c)", argv[1]);
        return 1;
    }
    double exact[EXPLAIN_V], beta;
    long counts[EXPLAIN_V], n_acc;
    fprintf(stderr, "One position of accept/reject: the draft proposes x ~ q and it is kept "
            "with probability\nmin(1, p(x)/q(x)); otherwise the position is drawn from "
            "norm(max(0, p - q)).\nP(emit x) = min(p(x), q(x)) + (1 - sum min(p, q)) * "
            "residual(x), which is p(x).\n");
    explain_position(stderr, "Nain's example: draft q and target p over A, B, C, D",
                     EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 1.0f, EXPLAIN_ROUNDS, 1,
                     exact, &beta, counts, &n_acc);
    explain_position(stderr, "the same rows, greedy: both become one-hot at their argmax",
                     EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 0.0f, EXPLAIN_ROUNDS, 1,
                     exact, &beta, counts, &n_acc);
    return close_stdout(); // the table went to stderr; stdout must still close cleanly
}
#endif
