/*
 * test/test_exact.c: speculative sampling is exact, shown six ways, and every way can
 * fail. "Exact" means: the text is distributed as the target SERVED it (tempered; in
 * ./beyond also cut by top-k and top-p, Sampler), under plain decoding's context rule (the
 * prefill runs the prompt's last S tokens; a full cache restarts from the last S/2 tokens,
 * current_token last), whichever draft proposed it and however --draft-p-min cut its
 * drafting short. Two codes are tested: specdec.c's core (the bigram draft, the four
 * phases draft_tokens, verify_candidates, accept_reject, trim_kv_cache standing together
 * in speculative_generate, the refill as its own pass, refill_cache), and beyond.c's one
 * loop as a chain of K (tree_generate with chain_shape(K): draft_tree, verify_tree, the
 * exact rule judge_children/accept_reject_tree in double precision, the folded refill
 * restart_cache in tree_round; the model draft, prompt lookup, top-k/top-p through
 * served_probs and bigram_served_probs, --draft-p-min through tb->stopped).
 *
 *   1. Exact enumeration. For small hand-made draft/target pairs (V <= 5, K <= 3) the
 *      probability that one round emits each token sequence is computed exactly, with no
 *      sampling: every uniform draw is forced (rng_force, with one spare draw beyond the
 *      2k+1 a round needs), and for each draw the test finds, by bisection over the 2^53
 *      values rng_uniform can return, the exact sub-intervals on which the code's decision
 *      stays the same. The test knows nothing of the algorithm: the code's own branches are
 *      measured. A round emits 1..k+1 tokens; completing its output with the target to k+1
 *      tokens must give exactly the served target's probability for every sequence, to
 *      1e-12 (the rows are multiples of 2^-20, so the float rows sum to exactly 1), and the
 *      first guess must be accepted with probability sum min(p, q). The core's round
 *      (draft_tokens + accept_reject) on: a table with one row, a bigram table, a draft
 *      whose row depends on the whole prefix (k one-guess draft_tokens calls, each with its
 *      position's table: rows no bigram could give, as a model draft's are). The beyond
 *      chain's round (draft_tree + accept_reject_tree on a chain of k, the target's rows set
 *      by the case) on: the A/B/C/D table and the bigram table (the double-precision rule
 *      uncut), prompt lookup (the real lookup_match over a text the case builds: three
 *      one-hot proposals, one, or none, which makes the round a plain step), the served cut
 *      (top-k 2, top-p 0.45, and both: top-k 2, top-p 0.6, with ties at the cut; applied by
 *      the real functions, the target's rows by apply_top_k_top_p and the draft's by
 *      bigram_rows/bigram_served_probs with the same Sampler; their rows are dyadic with
 *      a kept mass of 1/2, so the cut rows still sum to exactly 1, checked), an uncut draft
 *      against a cut target (exact too: accept/reject is exact for any q), and
 *      --draft-p-min (Draft.p_min 0.2 on one row, 0.15 and 0.45 on bigram tables against the
 *      context-dependent target, 0.2 with top-k 2), so that some guesses fall below it (the
 *      draft stops after them) and some do not; each must show, at t = 1, drafts of K = 3
 *      that stop early and drafts that go on past the first guess. Each case runs with the
 *      draft at t = 1 and t = 0 (lookup at t = 1 only; t = 0 in the chain: tb->top, the
 *      draft's top guess judged as sure), K = 1..3, with and without the bonus.
 *   2. Chi-square tests of the real code path. (a) On fixed p/q rows, 40,000 draws per
 *      case: hand-made rows and the trained target's row after a prompt against the bigram
 *      row at t = 1 and t = 0.7 through the core's draft_tokens + accept_reject; the trained
 *      rows served with top-k 5 and with top-p 0.8 through the beyond chain of one
 *      (draft_tree + accept_reject_tree). (b) End to end: the joint of the first two
 *      generated characters (the 1st sampled from the prefill, the 2nd by the first round)
 *      and of the 2nd and 3rd (the first two the speculative rounds emit), seeded runs of
 *      -n 5 with K = 4 on the trained model, against the exact joints of the served
 *      distribution from plain forward passes under plain decoding's context rule
 *      (plain_feed). The core's speculative_generate after "ROMEO:\n" with the bigram draft
 *      at t = 1.0 and 0.7 (30,000 runs each); beyond's chain (test_tree_generate, a copy of
 *      tree_generate with a hook, test/round_copy.h): the model draft
 *      (tinyshakespeare/draft.bin) at t = 1, top-k 3 and top-p 0.6 (6,000 runs each), prompt
 *      lookup at t = 1 on a prompt that repeats itself (6,000 runs); after a prompt of
 *      exactly S tokens (the corpus at 5000), which fills the cache, so that every first
 *      round is a folded one (restart_cache: its one verify pass reruns the S/2 - 1 tokens
 *      before current_token), the bigram draft (5,000 runs) and the model draft (3,000) at
 *      t = 1; with --draft-p-min 0.3 after "ROMEO:\n", the bigram draft (6,000 runs) and the
 *      model draft (4,000), each checked to stop some first rounds early and let some draft
 *      2 or more. Cells expected below 5 are pooled into one; the test passes when the
 *      p-value is above 1e-4. Tokens of served probability 0 must never come out.
 *   3. The copies are the real loops: test_generate (speculative_generate with a hook) and
 *      test_tree_generate (tree_generate with a hook), from test/round_copy.h, give the real
 *      loop's text, Stats/RunStats (but wall times), token sources and final cache lengths
 *      bit for bit, over 8S+20 tokens (the core at t = 1, 0.7 and 0; the chain with each
 *      draft, bigram, gpt, lookup, at t = 1, 0, top-k 5 top-p 0.9, --draft-p-min 0.4 and
 *      t = 0.7), refilling or restarting the cache many times (required).
 *   4. Edge cases: forced u = 0 and u just below 1, a residual with no mass; greedy runs
 *      that must equal plain decoding's text token for token (generate): the core with K
 *      larger than the tokens still needed, K = 1, K = block_size - 1, a draft that never
 *      agrees (every round emits one token); beyond's chain with each draft (and the bigram
 *      and model drafts with --draft-p-min 0.3 and 0.7), and after a prompt that fills the
 *      context (round 1 folded) with each draft; every run but the first refills or
 *      restarts the cache (required). The target as its own draft in the core: every draft
 *      accepted.
 *   5. After every round of long runs (the copies' hooks): the round's k+1 served rows equal,
 *      bit for bit, plain decoding's rows from a fresh model fed current_token and then each
 *      guess one by one under the context rule on top of the context the rule gives the
 *      round; the target's KV cache has the rule's length and equals, bit for bit, a fresh
 *      prefill over those tokens; a model draft's cache equals a fresh prefill of the draft
 *      over the first of them (it may lag, never run ahead). The counters add up, the passes
 *      (the core: prefill + rounds + refills; the chain: RunStats.pass and .size by kind and
 *      size, the folded pass S/2 + k tokens), alpha (Stats.judged, alpha_sum) equals the
 *      test's own sum, and the accepted count is within 4.5 sigma of it. The core with the
 *      bigram draft at t = 1, 0.7 and 0 (2,000 tokens each); the chain with the bigram draft
 *      at t = 1, the model draft at t = 1, top-k 5 top-p 0.9, --draft-p-min 0.7, and lookup
 *      at t = 1 (1,000 tokens each).
 *   6. test/explain's numbers (explain_position, test/explain.c, included here and so
 *      built on this build's draft_tokens and accept_reject): the exact column is p, the
 *      measured column fits it.
 *   7. One round of one guess, enumerated over every value of its uniforms (forced, 2^53
 *      values each, by bisection) on the trained model's real rows, through this build's
 *      accept_reject: below 1e-9 of p in the correct build, above it in BREAK_RESIDUAL's and
 *      BREAK_RATIO's. (./specdec --selftest ran this check until it moved here.)
 *
 * Forced draws: specdec.c's generator has no test hooks, so every build of this test includes a
 * copy of specdec.c (test/run_tests.sh makes it) whose rng_uniform first returns the uniforms
 * that rng_force below queued for that generator, then generates again. The splice is this
 * one-line sed, which must change exactly one line (else it is stale and the build FAILs):
 * splice: s|^    return (double)(rng_u64(r) >> 11)|    return forced_left(r) ? forced_next() : (double)(rng_u64(r) >> 11)|
 *
 * Broken builds: each plants one bug as a one-line sed of the file that now holds the
 * behaviour (test/run_tests.sh applies it to a copy, which this file includes through
 * SPECDEC_C or BEYOND_C); the tests that must see it then FAIL, and print PASS "expected
 * failure ...".
 * broken build: -DBREAK_RESIDUAL
 * mutant BREAK_RESIDUAL: s|if (token >= 0) // the usual case: a draw from the adjusted distribution|if (token < -1) // BREAK_RESIDUAL: from p|
 * broken build: -DBREAK_RATIO
 * mutant BREAK_RATIO: s|if (u\[i\] < fmin(1.0, p / q)) {|if (u[i] < fmin(1.0, q / p)) {|
 * broken build: -DBREAK_DRAFT_Q
 * mutant BREAK_DRAFT_Q: s|return sample_from(q, d->V, rng_uniform(rng)); // one uniform per guess|int x = sample_from(q, d->V, rng_uniform(rng)); memcpy(q, bigram_get_probs(d, token), (size_t)d->V * sizeof(float)); return x;|
 * broken build: -DBREAK_TRIM
 * mutant BREAK_TRIM: s|^    int keep = cache_len_before_verify + num_accepted; // departure 6: the blog slices k\[:, :keep\]|    int keep = s->cache_len;|
 * broken build: -DBREAK_FILTER_DRAFT
 * mutant-beyond BREAK_FILTER_DRAFT: s|memcpy(left, tb->q + |memcpy(left, tb->own + |
 * broken build: -DBREAK_UNFILTERED_Q
 * mutant-beyond BREAK_UNFILTERED_Q: s|tb->Q_work\[x\] = tb->q\[(size_t)r \* V + x\] / q_sum;|tb->Q_work[x] = tb->own[(size_t)r * V + x];|
 * broken build: -DBREAK_FOLD
 * mutant-beyond BREAK_FOLD: s|int rerun = g->config.block_size / 2 - 1;|int rerun = g->config.block_size / 2;|
 * broken build: -DBREAK_P_MIN
 * mutant-beyond BREAK_P_MIN: s|if (tb->stopped) break;|if (tb->stopped) { tb->rows--; tb->n_children[tb->parent[last]]--; break; }|
 *   BREAK_RESIDUAL      (specdec.c, sample_adjusted) after a rejection the resampled token
 *                       is drawn from p instead of from norm(max(0, p - q)): caught by the
 *                       core's enumeration, chi-squares, end-to-end runs, explain and the
 *                       self-test's sampling check;
 *   BREAK_RATIO         (specdec.c, accept_reject) a candidate is accepted with min(1, q/p)
 *                       instead of min(1, p/q): caught by the same;
 *   BREAK_DRAFT_Q       (specdec.c, bigram_sample) the bigram draft samples from its
 *                       tempered row, then the draft_probs row handed to accept_reject is
 *                       overwritten with the raw table row (bigram_get_probs): caught at
 *                       t != 1 (section 1 at t = 0, sections 2a and 2b at t = 0.7);
 *   BREAK_TRIM          (specdec.c, trim_kv_cache) does nothing: rejected candidates stay in
 *                       the target's cache: caught by section 5's core cache runs, section
 *                       4's core greedy runs and section 2b's core cases;
 *   BREAK_FILTER_DRAFT  (beyond.c, add_children) the chain's guesses are drawn from the
 *                       draft's own row (t = 1, uncut) while the rows judged are the served
 *                       (cut) ones: a guess the cut removed has Q = 0 there (and passes:
 *                       p/0). Caught by the cut cases of sections 1, 2a and 2b;
 *   BREAK_UNFILTERED_Q  (beyond.c, start_node) the guesses are drawn from the served (cut)
 *                       rows, but the Q a child is judged against is the draft's own uncut
 *                       row: caught by the same cut cases;
 *   BREAK_FOLD          (beyond.c, restart_cache) the round that finds the cache full folds
 *                       at the wrong position: the verify pass reruns S/2 tokens before
 *                       current_token (current_token at position S/2), where plain
 *                       decoding's refill keeps S/2 tokens, current_token last at position
 *                       S/2 - 1. Caught by section 4's chain greedy runs, section 5's chain
 *                       rows and cache length, and section 2b's folded first rounds;
 *   BREAK_P_MIN         (beyond.c, draft_tree) --draft-p-min drops the unsure guess: a guess
 *                       below p_min ends the drafting WITHOUT being proposed (the real draft
 *                       proposes it, then stops), and the kept guesses are judged with their
 *                       whole q row. A kept guess was drawn from q but kept only when the
 *                       draft was sure of it, so its law is q restricted to the sure tokens,
 *                       not the q in the ratio (a dropped first guess makes the round a plain
 *                       step). Caught by section 1's p_min cases (their first guess is
 *                       accepted with the sum over the sure tokens of min(p, q), not sum
 *                       min(p, q)) and section 2b's p_min cases.
 *   A draft cut differently but CONSISTENTLY (the row drawn from is the row judged) is not a
 *   bug: accept/reject is exact for any q (section 1's uncut draft shows it), so the two cut
 *   bugs plant the mismatch between the row a guess was drawn from and the row in the
 *   ratio. Both change nothing at t = 1 with top-k and top-p off (the draft's own row is
 *   then its served row). Likewise a stopping rule that reads only the draft is exact (the
 *   guess that ends the drafting is still drawn from q and judged with q): BREAK_P_MIN
 *   breaks it by conditioning what is kept.
 *
 * Run from the repository root with tinyshakespeare/input.txt, model.bin and draft.bin
 * present. Sanitizer builds run the model-heavy parts with fewer runs: 500 instead of
 * 30,000, 100 instead of 6,000, 40 and 30 instead of 5,000 and 3,000 (a prompt of S
 * tokens), 100 and 50 instead of 6,000 and 4,000 (--draft-p-min) end-to-end runs; 120 or
 * 100 instead of 2,000 and 50 instead of 1,000 tokens per cache run; 2S+20 instead of
 * 8S+20 tokens per copy comparison (and not at t = 0.7); 100 instead of 300 greedy tokens
 * per draft, 50 instead of 100 after a prompt of S tokens (the checks are the same).
 * The quick tier (TEST_TIER=quick, make test) runs a fifth of 2b's runs in the cases some
 * broken build must fail, as that broken build does, and so is shown to still see its bug.
 */
#define TESTING
// The forced uniforms of one generator (the splice above reads them): while forced_n > 0,
// the generator forced_rng returns forced_u[0], forced_u[1], ... and its state does not move.
static const void *forced_rng;
static const double *forced_u;
static int forced_n;
static int forced_left(const void *r) { return r == forced_rng && forced_n > 0; }
static double forced_next(void) {
    forced_n--;
    return *forced_u++;
}
// Makes the next n draws of generator r return u[0] .. u[n-1] (u must outlive them).
static void rng_force(const void *r, const double *u, int n) {
    forced_rng = r;
    forced_u = u;
    forced_n = n;
}
#ifndef BEYOND_C
#define BEYOND_C "../beyond.c" // a broken build includes an edited copy (test/run_tests.sh)
#endif
#include BEYOND_C   // beyond.c includes SPECDEC_C, specdec.c or a broken build's copy
#include "explain.c" // explain_position (section 6), on this build's phases

#include "check.h"
#include "stats.h" // chi_square, plain_feed, exact_joint: shared with test_drafts

#define CORPUS_PATH "tinyshakespeare/input.txt"
#define MODEL_PATH "tinyshakespeare/model.bin"
#define U_BELOW_1 0x1.fffffffffffffp-1 // the largest double below 1
#define GRID 9007199254740992.0         // 2^53: rng_uniform returns i / 2^53
#define GRID_N 9007199254740992ULL

// The bug this build carries, as a bit (0 in the correct build).
#define CATCH_RESIDUAL 1
#define CATCH_RATIO 2
#define CATCH_DRAFT_Q 4
#define CATCH_TRIM 8
#define CATCH_FILTER_DRAFT 16
#define CATCH_UNFILTERED_Q 32
#define CATCH_FOLD 64
#define CATCH_P_MIN 128
#if defined(BREAK_RESIDUAL)
#define BUG CATCH_RESIDUAL
#define BUG_NAME "BREAK_RESIDUAL"
#elif defined(BREAK_RATIO)
#define BUG CATCH_RATIO
#define BUG_NAME "BREAK_RATIO"
#elif defined(BREAK_DRAFT_Q)
#define BUG CATCH_DRAFT_Q
#define BUG_NAME "BREAK_DRAFT_Q"
#elif defined(BREAK_TRIM)
#define BUG CATCH_TRIM
#define BUG_NAME "BREAK_TRIM"
#elif defined(BREAK_FILTER_DRAFT)
#define BUG CATCH_FILTER_DRAFT
#define BUG_NAME "BREAK_FILTER_DRAFT"
#elif defined(BREAK_UNFILTERED_Q)
#define BUG CATCH_UNFILTERED_Q
#define BUG_NAME "BREAK_UNFILTERED_Q"
#elif defined(BREAK_FOLD)
#define BUG CATCH_FOLD
#define BUG_NAME "BREAK_FOLD"
#elif defined(BREAK_P_MIN)
#define BUG CATCH_P_MIN
#define BUG_NAME "BREAK_P_MIN"
#else
#define BUG 0
#define BUG_NAME ""
#endif

// The cut-dependent bugs: they change nothing at t = 1 while top-k and top-p are off.
#define CATCH_CUT (CATCH_FILTER_DRAFT | CATCH_UNFILTERED_Q)
// The bugs of specdec.c's core, and of beyond.c's chain
#define CATCH_CORE (CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q | CATCH_TRIM)
#define CATCH_BEYOND (CATCH_CUT | CATCH_FOLD | CATCH_P_MIN)

// test_generate, test_tree_generate, runs, case_check, broken_verdict
#include "round_copy.h"

// ----------------------------------------------------------------------------
// Messages

// "t=1.0", "t=1.0 top-k 3", "t=1.0 top-p 0.6": a Sampler for the messages.
static void sampler_name(char *out, size_t n, const Sampler *s) {
    int len = snprintf(out, n, "t=%.1f", s->temperature);
    if (s->top_k > 0) len += snprintf(out + len, n - len, " top-k %d", s->top_k);
    if (s->top_p > 0.0f) snprintf(out + len, n - len, " top-p %g", s->top_p);
}

// s with each newline written as \n, for a message on one line.
static void escape_newlines(char *out, size_t n, const char *s) {
    size_t j = 0;
    for (; *s && j + 2 < n; s++) {
        if (*s == '\n') out[j++] = '\\';
        out[j++] = *s == '\n' ? 'n' : *s;
    }
    out[j] = '\0';
}

// ----------------------------------------------------------------------------

// ----------------------------------------------------------------------------
// 1. Exact enumeration of one round

enum { EV = 5, EK = 3, ETEXT = 12 }; // largest vocabulary, draft length, lookup text

// How a case's draft proposes. The target's rows are set by the case's ctx_dep.
typedef enum {
    Q_ONE_ROW, // a bigram table whose every row is q[0]
    Q_BIGRAM,  // a bigram table: row q[last] after token last
    Q_PREFIX,  // guess i after the prefix current, c0 .. c(i-1): row q[(sum of the prefix's
               // tokens + i) % V]. It depends on the whole prefix, as a model draft's row
               // does, so no bigram table can give it (the core's round only)
    Q_LOOKUP   // prompt lookup over the case's text: one-hot rows, no uniform drawn
} DraftShape;

// A hand-made draft and target. The target's row for position i of a round depends on
// the token before it: row p[0] for every context (ctx_dep = 0), or row p[(last + i) % V]
// (ctx_dep = 1), which no bigram table can equal. top_k and top_p are the served cut:
// the target's rows are cut by apply_top_k_top_p, the draft's by bigram_rows (through
// bigram_served_probs) with the same Sampler, unless draft_uncut says the draft is not cut.
// chain: 1 runs the round through beyond.c's chain (draft_tree + accept_reject_tree), 0
// through specdec.c's draft_tokens + accept_reject (no cut, no lookup, no p_min there).
typedef struct {
    const char *name;
    int chain;
    int V, ctx_dep;
    DraftShape shape;
    int top_k;
    float top_p;
    int draft_uncut;          // 1: the draft's rows are not cut (a q the cut did not shape)
    float p_min;              // the table draft's --draft-p-min (0: off)
    int text[ETEXT], n_text;  // Q_LOOKUP: the text before the round, the current token last
    int first_guess;          // Q_LOOKUP: what the text makes lookup propose first (-1: none)
    double q_raw[EV][EV];     // draft rows (normalised and made dyadic by make_rows)
    double p_raw[EV][EV];     // target rows
    float q[EV][EV], p[EV][EV];
    float p_served[EV][EV];   // the target's rows after the cut: what the round must match
} EnumCase;

// Normalises each row and rounds it to multiples of 2^-20, adjusting the largest entry
// so the row sums to exactly 1 in float and in double; zeros stay exactly zero.
static void make_rows(float out[EV][EV], double raw[EV][EV], int V, int rows) {
    for (int a = 0; a < rows; a++) {
        double z = 0.0, sum = 0.0;
        int big = 0;
        for (int j = 0; j < V; j++) z += raw[a][j];
        for (int j = 0; j < V; j++) {
            double x = raw[a][j] / z;
            double r = x > 0.0 ? fmax(1.0, round(x * 1048576.0)) / 1048576.0 : 0.0;
            out[a][j] = (float)r;
            sum += r;
            if (out[a][j] > out[a][big]) big = j;
        }
        out[a][big] = (float)(out[a][big] + (1.0 - sum)); // exact: all multiples of 2^-20
    }
}

// The case's Sampler at temperature t, for the target's rows or (for_draft) the draft's.
static Sampler case_sampler(const EnumCase *c, float t, int for_draft) {
    Sampler s = {t, c->top_k, c->top_p};
    if (for_draft && c->draft_uncut) {
        s.top_k = 0;
        s.top_p = 0.0f;
    }
    return s;
}

// The target's served row for position i (0-based) of a round, after token last.
static const float *served_row(const EnumCase *c, int last, int i) {
    return c->ctx_dep ? c->p_served[(last + i) % c->V] : c->p_served[0];
}

// What one round did under a given list of forced uniforms.
typedef struct {
    int consumed;   // uniforms drawn
    int overrun;    // drew more than were forced (generated ones): a test bug
    int k;          // guesses the draft proposed (lookup and p_min may propose fewer)
    int cand[EK], rejected_at, n, out[EK + 1];
} Outcome;

// Uniforms forced in a round of k drafts: k draft, up to k accept, one resample or bonus,
// and one spare, so a round that draws once more is measured like any other instead of
// running past the forced list. The correct round never uses the spare.
#define FORCED(k) (2 * (k) + 2)

typedef struct {
    const EnumCase *c;
    BigramDraft table_draft;  // the core's draft: the case's table
    Draft d;                  // the chain's draft: the table (with p_min) or lookup
    float table[EV * EV];     // the table's rows (Q_PREFIX rewrites them per guess)
    SpecBuffers b;            // the core's round
    TreeBuffers tb;           // the chain's round (a chain of up to EK)
    int k, remaining, current; // k asked for; remaining: k (no bonus) or k+1 tokens wanted
    float t;
    double u[FORCED(EK)];         // the forced draws (FORCED)
    double emit[EK + 2][625];     // emit[n][y] = P(the round emits exactly y, n tokens)
    double accept0;               // P(a first guess is proposed and accepted)
    double stopped;               // P(the draft proposed fewer guesses than asked)
    double went_on;               // P(the draft proposed 2 or more: a first guess went on)
    long leaves, runs;
    int overrun;
} Enum;

// The core's phase 1 through this build's draft_tokens: a table in one call, or the prefix
// draft as k one-guess calls, each with the table of its position (row a: the draft's row
// after the prefix that ends in a).
static int draft_case(Enum *e, Rng *r) {
    const EnumCase *c = e->c;
    int V = c->V;
    if (c->shape != Q_PREFIX) {
        draft_tokens(&e->table_draft, e->current, e->k, e->t, r, &e->b);
        return e->k;
    }
    int sum = 0, last = e->current; // sum: the prefix's tokens before last
    for (int i = 0; i < e->k; i++) {
        for (int a = 0; a < V; a++)
            memcpy(e->table + a * V, c->q[(sum + a + i) % V], V * sizeof(float));
        SpecBuffers at = e->b; // the buffers from guess i on: the one-guess call writes row 0
        at.candidates += i;
        at.draft_probs += (size_t)i * V;
        draft_tokens(&e->table_draft, last, 1, e->t, r, &at);
        sum += last;
        last = e->b.candidates[i];
    }
    return e->k;
}

// The core: the draft, the target rows a verify pass would give, and accept_reject, with
// the bonus allowed as speculative_generate allows it: when fewer were asked than wanted.
static void run_core_round(Enum *e, Outcome *o, Rng *r) {
    int V = e->c->V;
    int k = draft_case(e, r);
    for (int i = 0; i <= k; i++) {
        int last = i == 0 ? e->current : e->b.candidates[i - 1];
        memcpy(e->b.target_probs + (size_t)i * V, served_row(e->c, last, i), V * sizeof(float));
    }
    o->k = k;
    o->n = accept_reject(&e->b, k, k < e->remaining, r);
    o->rejected_at = e->b.rejected_at;
    memcpy(o->cand, e->b.candidates, (size_t)k * sizeof(int));
    memcpy(o->out, e->b.emitted, (size_t)o->n * sizeof(int));
}

// The chain: draft_tree on a chain of k with the case's Sampler (tb->top at t = 0 or for
// lookup, as run_tree sets it), each row's p set to the target's served row after its token
// (what verify_tree would give), then accept_reject_tree; limit = the tokens wanted.
static void run_chain_round(Enum *e, Outcome *o, Rng *r) {
    const EnumCase *c = e->c;
    int V = c->V;
    TreeBuffers *tb = &e->tb;
    Sampler s = case_sampler(c, e->t, 1);
    tb->shape = chain_shape(e->k);
    tb->room = e->k + 1;
    tb->limit = e->remaining;
    tb->top = e->t == 0.0f || c->shape == Q_LOOKUP;
    tb->cache_len = 0;
    Tokens text = c->shape == Q_LOOKUP ? (Tokens){c->text, c->n_text}
                                       : (Tokens){&e->current, 1};
    draft_tree(&e->d, tb, &text, &s, r);
    for (int row = 0; row < tb->rows; row++)
        memcpy(tb->p + (size_t)row * V, served_row(c, tb->token[row], tb->depth[row]),
               V * sizeof(float));
    int k = tb->rows - 1;
    o->k = k;
    o->n = accept_reject_tree(tb, r);
    o->rejected_at = o->n > tb->passed && tb->n_children[tb->path[tb->passed]] > 0 ? tb->passed
                                                                                   : -1;
    for (int i = 0; i < k; i++) o->cand[i] = tb->token[1 + i];
    memcpy(o->out, tb->emitted, (size_t)o->n * sizeof(int));
}

static void run_round(Enum *e, Outcome *o) {
    int m = FORCED(e->k);
    Rng r;
    rng_seed(&r, 1);
    uint64_t state = r.state;
    rng_force(&r, e->u, m);
    memset(o, 0, sizeof(*o));
    if (e->c->chain) run_chain_round(e, o, &r);
    else run_core_round(e, o, &r);
    o->consumed = m - forced_n;
    o->overrun = r.state != state;
    e->runs++;
}

// Runs the round with draw j at grid point i / 2^53 and every later draw at 0.
static void run_at(Enum *e, int j, uint64_t i, Outcome *o) {
    e->u[j] = (double)i / GRID;
    for (int l = j + 1; l < FORCED(e->k); l++) e->u[l] = 0.0;
    run_round(e, o);
}

// Walks every branch of draw j onward, given draws 0..j-1 (probability w so far).
// The code's decision at draw j is monotone in u (an inverse CDF or a threshold), so
// each outcome owns one interval of grid points: bisection finds where it ends.
static void enumerate(Enum *e, int j, double w) {
    Outcome lo_out, o;
    if (j < FORCED(e->k)) run_at(e, j, 0, &lo_out);
    else run_round(e, &lo_out); // every draw a round can make is fixed: it is a leaf
    if (lo_out.overrun) { e->overrun = 1; return; }
    if (lo_out.consumed <= j) {
        // draw j does not happen on this branch: the round is over
        int y = 0;
        for (int i = 0; i < lo_out.n; i++) y = y * e->c->V + lo_out.out[i];
        e->emit[lo_out.n][y] += w;
        if (lo_out.k > 0 && lo_out.rejected_at != 0) e->accept0 += w;
        if (lo_out.k < e->k) e->stopped += w;
        if (lo_out.k >= 2) e->went_on += w;
        e->leaves++;
        return;
    }
    uint64_t lo = 0;
    while (lo < GRID_N) {
        run_at(e, j, lo, &lo_out);
        uint64_t a = lo, hi = GRID_N - 1;
        run_at(e, j, hi, &o);
        if (memcmp(&o, &lo_out, sizeof(o)) == 0) {
            hi = GRID_N; // one outcome up to the end of [0, 1)
        } else {
            // invariant: a has lo's outcome, hi does not
            while (hi - a > 1) {
                uint64_t mid = a + (hi - a) / 2;
                run_at(e, j, mid, &o);
                if (memcmp(&o, &lo_out, sizeof(o)) == 0) a = mid;
                else hi = mid;
            }
        }
        run_at(e, j, lo, &o); // put draw j back inside the interval for the branches below
        enumerate(e, j + 1, w * (double)(hi - lo) / GRID);
        lo = hi;
    }
}

// The draft's row after the current token at temperature t, as the test computes it:
// the case's row cut by apply_top_k_top_p with the draft's Sampler (t = 1), or one-hot at
// its largest entry (lowest index on ties) at t = 0; for lookup, one-hot at the case's
// first_guess, or all zero when the text gives none (nothing can be accepted).
static void first_draft_row(double *q, const EnumCase *c, int current, float t) {
    float row[EV];
    int best = 0;
    if (c->shape == Q_LOOKUP) {
        for (int j = 0; j < c->V; j++) q[j] = j == c->first_guess;
        return;
    }
    // Q_ONE_ROW has every row q[0]; Q_PREFIX's first row is q[(current + 0) % V]
    memcpy(row, c->q[current], sizeof(row));
    Sampler s = case_sampler(c, t, 1);
    apply_top_k_top_p(row, c->V, &s);
    for (int j = 0; j < c->V; j++)
        if (c->q[current][j] > c->q[current][best]) best = j;
    for (int j = 0; j < c->V; j++) q[j] = t == 0.0f ? j == best : row[j];
}

// Enumerates one round and compares: for every y of k+1 tokens,
//   sum_n P(round emits y_1..y_n) * prod_{i>n} p(y_i | y_<i)  ==  prod_i p(y_i | y_<i),
// with p the target's served (cut) rows. Returns the largest difference; *mass = total
// probability of the round's outcomes.
static double enumerate_case(Enum *e, double *mass, double *sum_min) {
    const EnumCase *c = e->c;
    int V = c->V, L = e->k + 1, total = 1;
    for (int i = 0; i < L; i++) total *= V;
    memset(e->emit, 0, sizeof(e->emit));
    e->accept0 = e->stopped = e->went_on = 0.0;
    enumerate(e, 0, 1.0);
    *mass = 0.0;
    for (int n = 1; n <= L; n++) {
        int cnt = 1;
        for (int i = 0; i < n; i++) cnt *= V;
        for (int y = 0; y < cnt; y++) *mass += e->emit[n][y];
    }
    double worst = 0.0;
    for (int y = 0; y < total; y++) {
        int tok[EK + 1], rest = y;
        for (int i = L - 1; i >= 0; i--) { tok[i] = rest % V; rest /= V; }
        // suffix[n] = prod_{i >= n} p(tok_i | tok_<i), the target's completion after n tokens
        double suffix[EK + 2];
        int prefix_id = 0;
        suffix[L] = 1.0;
        for (int i = L - 1; i >= 0; i--)
            suffix[i] = suffix[i + 1] * served_row(c, i ? tok[i - 1] : e->current, i)[tok[i]];
        double got = 0.0;
        for (int n = 1; n <= L; n++) {
            prefix_id = prefix_id * V + tok[n - 1];
            got += e->emit[n][prefix_id] * suffix[n];
        }
        if (fabs(got - suffix[0]) > worst) worst = fabs(got - suffix[0]);
    }
    // acceptance of the first guess: sum_x min(p_0(x), q_0(x))
    double q0[EV];
    first_draft_row(q0, c, e->current, e->t);
    *sum_min = 0.0;
    for (int x = 0; x < V; x++) *sum_min += fmin(q0[x], served_row(c, e->current, 0)[x]);
    return worst;
}

// Whether every row of the case sums to exactly 1 in double after the cut, the target's
// (p_served) and the draft's (through bigram_served_probs at t = 1, as the chain makes them).
// A row that sums to 1 +- 2^-24 would make the round's output differ from p by that much:
// the cut cases are built of entries whose kept mass divides them exactly.
static int rows_exact(const EnumCase *c) {
    int ok = 1;
    float table[EV * EV], q[EV];
    for (int a = 0; a < c->V; a++) memcpy(table + a * c->V, c->q[a], c->V * sizeof(float));
    BigramDraft d = {c->V, table};
    Sampler s = case_sampler(c, 1.0f, 1);
    for (int a = 0; a < c->V; a++) {
        double sp = 0.0, sq = 0.0;
        bigram_served_probs(q, &d, a, &s);
        for (int j = 0; j < c->V; j++) {
            sp += c->p_served[a][j];
            sq += q[j];
        }
        ok &= sp == 1.0 && (c->shape == Q_LOOKUP || sq == 1.0);
    }
    return ok;
}


// Dyadic entries for the cut cases: a row of {A, B, C, C, D} keeps A and B (mass 1/2)
// under top-k 2 and under top-p 0.45; a row of {E, E, E, F, F} keeps the first two E's
// (ties go to the lower index) under top-k 2, top-p 0.45, and both (top-k 2, top-p 0.6).
// A kept mass of 1/2 divides exactly, so the cut rows still sum to exactly 1.
#define A_ 0.3125
#define B_ 0.1875
#define C_ 0.171875
#define D_ 0.15625
#define E_ 0.25
#define F_ 0.125
// five target rows and five draft rows of those kinds, for the context-dependent cases
#define CUT_P {{B_, C_, A_, D_, C_}, {E_, F_, E_, E_, F_}, {D_, A_, C_, B_, C_}, \
               {C_, C_, D_, A_, B_}, {A_, D_, B_, C_, C_}}
#define CUT_Q {{A_, D_, C_, B_, C_}, {C_, A_, B_, C_, D_}, {E_, E_, F_, E_, F_}, \
               {D_, C_, C_, B_, A_}, {F_, E_, E_, F_, E_}}
// the context-dependent rows of the uncut cases (rounded to multiples of 2^-20)
#define CTX_P {{0.1, 0.6, 0.1, 0.1, 0.1}, {0.3, 0.0, 0.3, 0.2, 0.2}, \
               {0.05, 0.15, 0.5, 0.1, 0.2}, {0.25, 0.25, 0.25, 0.25, 0.0}, \
               {0.6, 0.1, 0.1, 0.1, 0.1}}
#define CTX_Q {{0.5, 0.2, 0.1, 0.1, 0.1}, {0.1, 0.1, 0.6, 0.1, 0.1}, \
               {0.2, 0.2, 0.2, 0.2, 0.2}, {0.05, 0.05, 0.1, 0.4, 0.4}, \
               {0.3, 0.3, 0.0, 0.2, 0.2}}


static void test_enumeration(void) {
    if (!runs(CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q | CATCH_CUT | CATCH_P_MIN)) return;
    static EnumCase cases[] = {
        // the core's round: specdec.c's draft_tokens + accept_reject
        // the table of the seed paper's section 3.1 (A, B, C, D)
        {.name = "core, the A/B/C/D table (q .1/.6/.2/.1, p .05/.1/.6/.25)", .V = 4,
         .q_raw = {{0.10, 0.60, 0.20, 0.10}}, .p_raw = {{0.05, 0.10, 0.60, 0.25}}},
        {.name = "core, p == q", .V = 5, .q_raw = {{0.3, 0.1, 0.25, 0.15, 0.2}},
         .p_raw = {{0.3, 0.1, 0.25, 0.15, 0.2}}},
        {.name = "core, disjoint supports", .V = 5, .q_raw = {{0.5, 0.5, 0, 0, 0}},
         .p_raw = {{0, 0, 0.2, 0.3, 0.5}}},
        {.name = "core, one-hot p", .V = 5, .q_raw = {{0.2, 0.2, 0.2, 0.2, 0.2}},
         .p_raw = {{0, 0, 1, 0, 0}}},
        {.name = "core, one-hot q", .V = 5, .q_raw = {{0, 1, 0, 0, 0}},
         .p_raw = {{0.1, 0.3, 0.2, 0.2, 0.2}}},
        {.name = "core, q zero where p is not", .V = 5, .q_raw = {{0.4, 0.4, 0.2, 0, 0}},
         .p_raw = {{0.1, 0.2, 0.3, 0.2, 0.2}}},
        {.name = "core, context-dependent target, bigram draft", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .q_raw = CTX_Q, .p_raw = CTX_P},
        // a draft whose row depends on the whole prefix, as a model draft's does
        {.name = "core, context-dependent target, prefix-dependent draft", .V = 5,
         .ctx_dep = 1, .shape = Q_PREFIX, .q_raw = CTX_Q, .p_raw = CTX_P},
        // beyond.c's chain: draft_tree + accept_reject_tree (the rule in double)
        {.name = "chain, the A/B/C/D table", .chain = 1, .V = 4,
         .q_raw = {{0.10, 0.60, 0.20, 0.10}}, .p_raw = {{0.05, 0.10, 0.60, 0.25}}},
        {.name = "chain, context-dependent target, bigram draft", .chain = 1, .V = 5,
         .ctx_dep = 1, .shape = Q_BIGRAM, .q_raw = CTX_Q, .p_raw = CTX_P},
        // prompt lookup: one-hot rows copied from the text, no uniform drawn for them
        {.name = "chain, prompt lookup over 1 2 3 4 0 2 1 2 (proposes 3 4 0), "
                 "context-dependent target", .chain = 1, .V = 5, .ctx_dep = 1,
         .shape = Q_LOOKUP, .text = {1, 2, 3, 4, 0, 2, 1, 2}, .n_text = 8, .first_guess = 3,
         .p_raw = CTX_P},
        {.name = "chain, prompt lookup over 0 4 4 4 (proposes one token, whatever K)",
         .chain = 1, .V = 5, .ctx_dep = 1, .shape = Q_LOOKUP, .text = {0, 4, 4, 4},
         .n_text = 4, .first_guess = 4, .p_raw = CTX_P},
        {.name = "chain, prompt lookup over 0 1 2 3 (no match: a plain step)", .chain = 1,
         .V = 5, .ctx_dep = 1, .shape = Q_LOOKUP, .text = {0, 1, 2, 3}, .n_text = 4,
         .first_guess = -1, .p_raw = CTX_P},
        // the served cut on both sides, compared with the cut target
        {.name = "chain, top-k 2, one row each (kept sets {2,0} and {0,3})", .chain = 1,
         .V = 5, .top_k = 2, .q_raw = {{A_, D_, C_, B_, C_}}, .p_raw = {{B_, C_, A_, D_, C_}}},
        {.name = "chain, top-p 0.45, one row each (kept sets {1,3} and {2,1})", .chain = 1,
         .V = 5, .top_p = 0.45f, .q_raw = {{C_, B_, A_, C_, D_}},
         .p_raw = {{C_, A_, D_, B_, C_}}},
        {.name = "chain, top-k 2 and top-p 0.6, ties at the cut", .chain = 1, .V = 5,
         .top_k = 2, .top_p = 0.6f, .q_raw = {{E_, E_, F_, E_, F_}},
         .p_raw = {{E_, F_, E_, E_, F_}}},
        {.name = "chain, top-k 2, context-dependent target, bigram draft", .chain = 1, .V = 5,
         .ctx_dep = 1, .shape = Q_BIGRAM, .top_k = 2, .q_raw = CUT_Q, .p_raw = CUT_P},
        {.name = "chain, top-p 0.45, context-dependent target, bigram draft", .chain = 1,
         .V = 5, .ctx_dep = 1, .shape = Q_BIGRAM, .top_p = 0.45f, .q_raw = CUT_Q,
         .p_raw = CUT_P},
        {.name = "chain, top-k 2, prompt lookup over 1 2 3 4 0 2 1 2", .chain = 1, .V = 5,
         .ctx_dep = 1, .shape = Q_LOOKUP, .top_k = 2, .text = {1, 2, 3, 4, 0, 2, 1, 2},
         .n_text = 8, .first_guess = 3, .p_raw = CUT_P},
        // any q is exact: a draft left uncut, drawn from and judged by the same rows
        {.name = "chain, top-k 2 target, uncut bigram draft", .chain = 1, .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .top_k = 2, .draft_uncut = 1, .q_raw = CUT_Q, .p_raw = CUT_P},
        // --draft-p-min: a guess whose raw table entry is below p_min is the draft's last
        // (proposed and judged all the same); the draft reads only its own table
        {.name = "chain, p_min 0.2, one row each (guesses 0, 1 go on; 2, 3, 4 end the draft)",
         .chain = 1, .V = 5, .p_min = 0.2f, .q_raw = {{0.4, 0.3, 0.15, 0.1, 0.05}},
         .p_raw = {{0.1, 0.2, 0.3, 0.25, 0.15}}},
        {.name = "chain, p_min 0.15, context-dependent target, bigram draft", .chain = 1,
         .V = 5, .ctx_dep = 1, .shape = Q_BIGRAM, .p_min = 0.15f, .q_raw = CTX_Q,
         .p_raw = CTX_P},
        {.name = "chain, p_min 0.45, context-dependent target, bigram draft (greedy from 0: "
                 "guess 1 at .6 goes on, guess 2 at .4 ends the draft)", .chain = 1, .V = 5,
         .ctx_dep = 1, .shape = Q_BIGRAM, .p_min = 0.45f, .p_raw = CTX_P,
         .q_raw = {{0.1, 0.6, 0.1, 0.1, 0.1}, {0.1, 0.1, 0.4, 0.2, 0.2},
                   {0.5, 0.2, 0.1, 0.1, 0.1}, {0.2, 0.2, 0.2, 0.2, 0.2},
                   {0.3, 0.3, 0.0, 0.2, 0.2}}},
        {.name = "chain, p_min 0.2, top-k 2, context-dependent target, bigram draft (kept "
                 "guesses of .3125 and .25 go on, of .1875 end the draft)", .chain = 1,
         .V = 5, .ctx_dep = 1, .shape = Q_BIGRAM, .top_k = 2, .p_min = 0.2f, .q_raw = CUT_Q,
         .p_raw = CUT_P},
    };
    int n_cases = (int)(sizeof(cases) / sizeof(cases[0])), all_ok = 1;
    for (int ci = 0; ci < n_cases; ci++) {
        EnumCase *c = &cases[ci];
        // a broken build runs the cases of the code it broke
        if (BUG && !runs(c->chain ? CATCH_BEYOND : CATCH_CORE)) continue;
        // context-free rows give every context the same values
        int rows_q = c->shape == Q_BIGRAM || c->shape == Q_PREFIX ? c->V : 1;
        int rows_p = c->ctx_dep ? c->V : 1;
        make_rows(c->q, c->q_raw, c->V, rows_q);
        make_rows(c->p, c->p_raw, c->V, rows_p);
        for (int a = rows_q; a < c->V; a++) memcpy(c->q[a], c->q[0], sizeof(c->q[0]));
        for (int a = rows_p; a < c->V; a++) memcpy(c->p[a], c->p[0], sizeof(c->p[0]));
        // the target as served: its rows cut (at t = 1 the rows are the softmax itself)
        Sampler cut = case_sampler(c, 1.0f, 0);
        memcpy(c->p_served, c->p, sizeof(c->p));
        for (int a = 0; a < c->V; a++) apply_top_k_top_p(c->p_served[a], c->V, &cut);
        int exact = rows_exact(c);
        Enum *e = calloc(1, sizeof(Enum));
        e->c = c;
        for (int a = 0; a < c->V; a++) memcpy(e->table + a * c->V, c->q[a], c->V * sizeof(float));
        e->table_draft = (BigramDraft){c->V, e->table};
        Draft table_draft = {.kind = find_draft("bigram"), .name = "table", .V = c->V,
                             .bigram = {c->V, e->table}, .p_min = c->p_min};
        Draft lookup = {.kind = find_draft("lookup"), .name = "lookup", .V = c->V};
        e->d = c->shape == Q_LOOKUP ? lookup : table_draft;
        TreeShape chain = chain_shape(EK);
        if (build_spec_buffers(&e->b, EK, c->V) != 0 ||
            build_tree_buffers(&e->tb, &chain, c->V, 2 * EK + 2) != 0) {
            fprintf(stderr, "test_exact: out of memory\n");
            exit(1);
        }
        e->current = c->shape == Q_LOOKUP ? c->text[c->n_text - 1] : ci % c->V;
        // lookup reads no temperature: t = 0 would repeat t = 1
        float temps[2] = {1.0f, 0.0f};
        int n_temps = c->shape == Q_LOOKUP ? 1 : 2;
        for (int ti = 0; ti < n_temps; ti++) {
            double worst = 0.0, worst_mass = 0.0, acc = 0.0, smin = 0.0, stop = 0.0, on = 0.0;
            long leaves = 0, runs_before = e->runs;
            for (int k = 1; k <= EK; k++) {
                for (int bonus = 1; bonus >= 0; bonus--) {
                    double mass, sm;
                    e->k = k;
                    e->remaining = k + bonus;
                    e->t = temps[ti];
                    e->leaves = 0;
                    double d = enumerate_case(e, &mass, &sm);
                    if (d > worst || d != d) worst = d;
                    if (fabs(mass - 1.0) > worst_mass) worst_mass = fabs(mass - 1.0);
                    leaves += e->leaves;
                    if (k == 1 && bonus == 1) { acc = e->accept0; smin = sm; }
                    if (k == EK && bonus == 1) { stop = e->stopped; on = e->went_on; }
                }
            }
            // a p_min case must have guesses below p_min and above it: at t = 1, where every
            // kept token can be drawn, some drafts of K = 3 stop early, some go on past the
            // first guess
            int stops = c->p_min == 0.0f || temps[ti] != 1.0f || (stop > 0.0 && on > 0.0);
            int ok = exact && worst < 1e-12 && worst_mass < 1e-12 && !e->overrun &&
                     fabs(acc - smin) < 1e-12 && stops;
            char stop_note[96] = "";
            if (c->p_min > 0.0f)
                snprintf(stop_note, sizeof(stop_note), "; P(the draft stopped before %d "
                         "guesses) = %.6f, P(2 or more) = %.6f", EK, stop, on);
            all_ok &= case_check(ok, "enumeration, %s, draft t=%g, K=1..3 with and without "
                                 "bonus: %ld branches (%ld runs of the round): max |P(emit y) - "
                                 "served target(y)| = %.2g, |total - 1| = %.2g, P(first draft "
                                 "accepted) = %.6f vs sum min(p,q) = %.6f%s%s", c->name,
                                 temps[ti], leaves, e->runs - runs_before, worst, worst_mass,
                                 acc, smin, stop_note,
                                 exact ? "" : " (a cut row does not sum to 1)");
        }
        free_spec_buffers(&e->b);
        free_tree_buffers(&e->tb);
        free(e);
    }
    broken_verdict(all_ok, "the exact enumeration differs from the served target");
}

// ----------------------------------------------------------------------------
// Fixture: the corpus, the three drafts, and the trained model

typedef struct {
    Corpus corpus;
    Vocab vocab;
    Draft draft;  // the blog's bigram table (draft.bigram: the core's BigramDraft)
    Draft gpt;    // the model draft, tinyshakespeare/draft.bin
    Draft lookup; // prompt lookup
    Draft exit;   // the early exit, tinyshakespeare/exit.bin: the target's own first block
    Draft eagle;  // EAGLE, tinyshakespeare/eagle.bin: drafts the target's features
    Draft cascade; // the bigram drafting for the model draft
    GPT model;
} Fixture;

static int encode_str(const Vocab *v, const char *s, int *out) {
    long n = (long)strlen(s);
    if (encode(v, (const unsigned char *)s, (size_t)n, out) >= 0) return -1;
    return (int)n;
}

// A chain of K's tree buffers for the fixture's target, tb->top as run_tree sets it.
static void build_chain(TreeBuffers *tb, const GPT *g, int K, const Draft *d, const Sampler *s) {
    TreeShape chain = chain_shape(K);
    if (build_tree_buffers(tb, &chain, g->config.vocab_size, g->config.block_size) != 0) {
        fprintf(stderr, "test_exact: out of memory for a chain's buffers\n");
        exit(1);
    }
    tb->top = s->temperature == 0.0f || (d && d->kind->sure);
}

// ----------------------------------------------------------------------------
// 2a. Chi-square of one guess and its judgement on fixed rows

// The core: draws n tokens, a candidate from the draft's row after `current` at temperature
// t (draft_tokens), then accept_reject with k = 1 and no bonus; counts[x] = how often x was
// emitted.
static void draw_first_tokens(const BigramDraft *d, int current, const float *p, float t,
                              long n, uint64_t seed, long *counts, long *accepted) {
    int V = d->V;
    SpecBuffers b;
    build_spec_buffers(&b, 1, V);
    memcpy(b.target_probs, p, (size_t)V * sizeof(float));
    Rng r;
    rng_seed(&r, seed);
    *accepted = 0;
    for (long i = 0; i < n; i++) {
        draft_tokens(d, current, 1, t, &r, &b);
        int m = accept_reject(&b, 1, 0, &r);
        counts[b.emitted[0]] += m == 1;
        *accepted += b.rejected_at < 0;
    }
    free_spec_buffers(&b);
}

// The chain of one: draft_tree with the Sampler (the guess drawn from the served row), the
// target's row p, accept_reject_tree with no bonus (limit 1).
static void draw_first_tokens_chain(Draft *d, int current, const float *p, const Sampler *s,
                                    long n, uint64_t seed, long *counts, long *accepted) {
    int V = d->V;
    TreeBuffers tb;
    TreeShape chain = chain_shape(1);
    build_tree_buffers(&tb, &chain, V, 4);
    tb.top = s->temperature == 0.0f;
    Rng r;
    rng_seed(&r, seed);
    *accepted = 0;
    for (long i = 0; i < n; i++) {
        tb.room = 2;
        tb.limit = 1;
        draft_tree(d, &tb, &(Tokens){&current, 1}, s, &r);
        for (int row = 0; row < tb.rows; row++)
            memcpy(tb.p + (size_t)row * V, p, (size_t)V * sizeof(float));
        int m = accept_reject_tree(&tb, &r);
        counts[tb.emitted[0]] += m == 1;
        *accepted += tb.passed;
    }
    free_tree_buffers(&tb);
}

static void test_chi_square(Fixture *fx) {
    if (!runs(CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q | CATCH_CUT)) return;
    enum { DRAWS = 40000 };
    int all_ok = 1;
    // hand-made rows, one draft row for every token
    struct { const char *name; int V; float q[5], p[5]; } hand[] = {
        {"A/B/C/D table", 4, {0.10f, 0.60f, 0.20f, 0.10f}, {0.05f, 0.10f, 0.60f, 0.25f}},
        {"p with zeros", 5, {0.3f, 0.1f, 0.3f, 0.2f, 0.1f}, {0.0f, 0.5f, 0.0f, 0.3f, 0.2f}},
        {"disjoint supports", 5, {0.5f, 0.5f, 0, 0, 0}, {0, 0, 0.2f, 0.3f, 0.5f}},
    };
    // the core at t = 1: no tempering to get wrong
    for (int h = 0; h < 3 && runs(CATCH_RESIDUAL | CATCH_RATIO); h++) {
        int V = hand[h].V;
        float table[25];
        for (int a = 0; a < V; a++) memcpy(table + a * V, hand[h].q, V * sizeof(float));
        BigramDraft d = {V, table};
        long counts[5] = {0}, acc;
        double want[5], z = 0.0, smin = 0.0;
        for (int x = 0; x < V; x++) z += hand[h].p[x];
        for (int x = 0; x < V; x++) {
            want[x] = hand[h].p[x] / z;
            smin += fmin(hand[h].p[x], hand[h].q[x]);
        }
        draw_first_tokens(&d, 0, hand[h].p, 1.0f, DRAWS, 100 + h, counts, &acc);
        ChiSquare cs = chi_square(counts, want, V, DRAWS);
        double rate = (double)acc / DRAWS, sig = sqrt(smin * (1 - smin) / DRAWS);
        int ok = cs.pvalue > 1e-4 && cs.zero_hits == 0 && fabs(rate - smin) <= 4.5 * sig + 1e-12;
        all_ok &= case_check(ok, "chi-square, core, %s, %d draws: X2 = %.2f on %d df, p-value "
                             "%.3g; %ld draws of p = 0 tokens; acceptance %.4f vs sum min(p,q) "
                             "%.4f", hand[h].name, DRAWS, cs.stat, cs.cells - 1, cs.pvalue,
                             cs.zero_hits, rate, smin);
    }
    // real rows: the trained target after a prompt, the Tiny Shakespeare bigram draft, both
    // served alike (tempered; in the chain, then cut)
    GPT *g = &fx->model;
    int V = g->config.vocab_size, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\nWhat say", prompt);
    struct { Sampler s; int chain, catches; } served[] = {
        {{1.0f, 0, 0.0f}, 0, CATCH_RESIDUAL | CATCH_RATIO},
        {{0.7f, 0, 0.0f}, 0, CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q},
        {{1.0f, 5, 0.0f}, 1, CATCH_CUT},
        {{1.0f, 0, 0.8f}, 1, CATCH_CUT},
    };
    float *p = malloc((size_t)V * sizeof(float)), *q = malloc((size_t)V * sizeof(float));
    long *counts = malloc((size_t)V * sizeof(long));
    double *want = malloc((size_t)V * sizeof(double));
    for (int si = 0; si < 4; si++) {
        const Sampler *s = &served[si].s;
        if (!runs(served[si].catches)) continue;
        g->state.cache_len = 0;
        const float *lg = forward(g, prompt, np);
        served_probs(p, lg + (size_t)(np - 1) * V, V, s);
        bigram_served_probs(q, &fx->draft.bigram, prompt[np - 1], s); // the row it must sample
        double z = 0.0, smin = 0.0;
        int kept = 0;
        for (int x = 0; x < V; x++) z += p[x];
        for (int x = 0; x < V; x++) {
            want[x] = p[x] / z;
            smin += fmin(p[x], q[x]);
            counts[x] = 0;
            kept += p[x] > 0.0f;
        }
        long acc;
        if (served[si].chain)
            draw_first_tokens_chain(&fx->draft, prompt[np - 1], p, s, DRAWS, 200 + si, counts,
                                    &acc);
        else
            draw_first_tokens(&fx->draft.bigram, prompt[np - 1], p, s->temperature, DRAWS,
                              200 + si, counts, &acc);
        ChiSquare cs = chi_square(counts, want, V, DRAWS);
        double rate = (double)acc / DRAWS, sig = sqrt(smin * (1 - smin) / DRAWS);
        int ok = cs.pvalue > 1e-4 && cs.zero_hits == 0 && fabs(rate - smin) <= 4.5 * sig;
        char name[64];
        sampler_name(name, sizeof(name), s);
        all_ok &= case_check(ok, "chi-square, %s, trained target after \"ROMEO:\\nWhat say\" "
                             "vs the bigram row of 'y', both served %s (the target keeps %d "
                             "tokens), %d draws: X2 = %.2f on %d df (%d cells pooled), p-value "
                             "%.3g, %ld draws of p = 0 tokens; acceptance %.4f vs sum min(p,q) "
                             "%.4f (%.1f sigma)", served[si].chain ? "chain of 1" : "core",
                             name, kept, DRAWS, cs.stat, cs.cells - 1, cs.pooled, cs.pvalue,
                             cs.zero_hits, rate, smin, fabs(rate - smin) / sig);
    }
    free(p); free(q); free(counts); free(want);
    broken_verdict(all_ok, "the emitted tokens are not distributed as the served p");
}

// ----------------------------------------------------------------------------
// 2b. End to end: the joint of two characters from the loops

// One end-to-end case: the loop (the core's speculative_generate, with the bigram draft and
// no cut; or beyond's chain, test_tree_generate), a draft (with its --draft-p-min), a served
// distribution, a prompt (NULL: S tokens of the corpus, which fill the cache), how many
// runs, and the bugs it can see (a broken build runs only the cases that can see its bug;
// 0: the correct build only).
typedef struct {
    const char *what;
    int chain;
    Draft *draft;
    float p_min;
    Sampler s;
    const char *prompt;
    long runs, runs_san;
    int catches;
} JointCase;

// What the first round of each run did (test_tree_generate's hook), summed over the runs.
typedef struct {
    int round;                        // rounds so far in this run
    long restarted, stopped, went_on; // first rounds that restarted the cache, whose draft
                                      // stopped before the guesses it had room for (p_min),
                                      // and whose draft went on past a first guess
} FirstRounds;

static void watch_first_round(void *ctx, const GPT *g, const TreeBuffers *tb, int n,
                              const int *seq, int n_seq) {
    FirstRounds *w = ctx;
    (void)g; (void)n; (void)seq; (void)n_seq;
    if (w->round++ > 0) return;
    w->restarted += tb->restarted;
    w->stopped += tb->stopped;
    w->went_on += tb->rows - 1 >= 2;
}

#define CORPUS_AT 5000 // where the prompts that fill the context are cut from the corpus

// True in the quick tier of test/run_tests.sh (TEST_TIER=quick, make test).
static int quick_tier(void) {
    const char *tier = getenv("TEST_TIER");
    return tier && !strcmp(tier, "quick");
}

static void test_joint(Fixture *fx) {
    int core_bugs = CATCH_RESIDUAL | CATCH_RATIO | CATCH_TRIM;
    if (!runs(core_bugs | CATCH_DRAFT_Q | CATCH_CUT | CATCH_FOLD | CATCH_P_MIN)) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, N_NEW = 5;
    JointCase cases[] = {
        {"core, bigram draft", 0, &fx->draft, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\n", 30000, 500,
         core_bugs},
        {"core, bigram draft", 0, &fx->draft, 0.0f, {0.7f, 0, 0.0f}, "ROMEO:\n", 30000, 500,
         core_bugs | CATCH_DRAFT_Q},
        // the model draft (its own cache, caught up on the prompt in its first pass)
        {"chain, gpt draft", 1, &fx->gpt, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\n", 6000, 100, 0},
        // the served cut
        {"chain, gpt draft", 1, &fx->gpt, 0.0f, {1.0f, 3, 0.0f}, "ROMEO:\n", 6000, 100,
         CATCH_CUT},
        {"chain, gpt draft", 1, &fx->gpt, 0.0f, {1.0f, 0, 0.6f}, "ROMEO:\n", 6000, 100,
         CATCH_CUT},
        // prompt lookup: a repeated prompt, so the round after 'E' copies "O:\nR"
        {"chain, lookup draft", 1, &fx->lookup, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\nROMEO:\nROM",
         6000, 100, 0},
        // a prompt of S tokens fills the cache: the first round restarts it, and its one
        // verify pass reruns the window plain decoding refills with, then judges the guesses
        {"chain, bigram draft", 1, &fx->draft, 0.0f, {1.0f, 0, 0.0f}, NULL, 5000, 40,
         CATCH_FOLD},
        {"chain, gpt draft", 1, &fx->gpt, 0.0f, {1.0f, 0, 0.0f}, NULL, 3000, 30, CATCH_FOLD},
        // --draft-p-min: the drafts stop after a guess they are unsure of
        {"chain, bigram draft", 1, &fx->draft, 0.3f, {1.0f, 0, 0.0f}, "ROMEO:\n", 6000, 100,
         CATCH_P_MIN},
        {"chain, gpt draft", 1, &fx->gpt, 0.3f, {1.0f, 0, 0.0f}, "ROMEO:\n", 4000, 50,
         CATCH_P_MIN},
    };
    enum { N_CASES = sizeof(cases) / sizeof(cases[0]) };
    int n_cases = N_CASES, all_ok = 1;
    // the exact joints of each case (joints[ci] of characters 1 and 2, then of 2 and 3),
    // computed once for the cases that share a prompt and a serving
    double *joints[N_CASES] = {0};
    long *counts = malloc((size_t)V * V * sizeof(long)),
         *counts12 = malloc((size_t)V * V * sizeof(long));
    SpecBuffers b;
    build_spec_buffers(&b, K, V);
    for (int ci = 0; ci < n_cases; ci++) {
        JointCase *c = &cases[ci];
        if (BUG ? !(c->catches & BUG) : 0) continue;
        // a broken build's bug moves the joint far: a fifth of the runs still sees it, so
        // the quick tier runs that fifth in every case a broken build checks
        int fifth = BUG || (quick_tier() && c->catches);
        long runs_n = SANITIZED ? c->runs_san : fifth ? c->runs / 5 : c->runs;
        int prompt[64], np = S;
        char shown[96];
        if (c->prompt) {
            np = encode_str(&fx->vocab, c->prompt, prompt);
            char esc[64];
            escape_newlines(esc, sizeof(esc), c->prompt);
            snprintf(shown, sizeof(shown), "prompt \"%s\"", esc);
        } else {
            memcpy(prompt, fx->corpus.tokens + CORPUS_AT, (size_t)S * sizeof(int));
            snprintf(shown, sizeof(shown), "a prompt of S = %d tokens (the corpus at %d)", S,
                     CORPUS_AT);
        }
        int *seq = malloc((size_t)(np + N_NEW) * sizeof(int));
        for (int j = 0; j < ci && !joints[ci]; j++)
            if (joints[j] && !memcmp(&cases[j].s, &c->s, sizeof(Sampler)) &&
                (cases[j].prompt && c->prompt ? !strcmp(cases[j].prompt, c->prompt)
                                              : cases[j].prompt == c->prompt))
                joints[ci] = joints[j];
        if (!joints[ci]) {
            joints[ci] = malloc((size_t)2 * V * V * sizeof(double));
            exact_joint(g, prompt, np, &c->s, joints[ci], joints[ci] + (size_t)V * V);
        }
        const double *joint12 = joints[ci], *joint = joints[ci] + (size_t)V * V;
        memset(counts, 0, (size_t)V * V * sizeof(long));
        memset(counts12, 0, (size_t)V * V * sizeof(long));
        FirstRounds w = {0};
        long full_rounds = 0;
        TreeBuffers tb;
        if (c->chain) build_chain(&tb, g, K, c->draft, &c->s);
        c->draft->p_min = c->p_min;
        for (long run = 0; run < runs_n; run++) {
            Rng r;
            rng_seed(&r, 1000000 * (ci + 1) + (uint64_t)run);
            if (c->chain) {
                RunStats st;
                memset(&st, 0, sizeof(st));
                RunOptions o = {.max_new_tokens = N_NEW, .sampler = c->s, .rng = &r, .st = &st};
                w.round = 0;
                test_tree_generate(g, c->draft, &tb, &(Tokens){prompt, np}, &o, seq,
                                   watch_first_round, &w);
                full_rounds += st.core.drafted >= K;
            } else {
                Stats st;
                memset(&st, 0, sizeof(st));
                DecodeOptions o = {.max_new_tokens = N_NEW, .K = K, .temperature = c->s.temperature,
                                   .rng = &r, .st = &st};
                speculative_generate(g, &c->draft->bigram, &b, &(Tokens){prompt, np}, &o, seq);
                full_rounds += st.drafted >= K;
            }
            counts12[seq[np] * V + seq[np + 1]]++;
            counts[seq[np + 1] * V + seq[np + 2]]++;
        }
        c->draft->p_min = 0.0f;
        if (c->chain) free_tree_buffers(&tb);
        char served[64], how[160] = "";
        sampler_name(served, sizeof(served), &c->s);
        if (c->p_min > 0.0f)
            snprintf(how, sizeof(how), ", --draft-p-min %g", c->p_min);
        if (!c->prompt)
            snprintf(how + strlen(how), sizeof(how) - strlen(how), " (round 1 restarts the "
                     "cache)");
        // the case runs what it says: a p_min case's first rounds stop early, and some go
        // on past a sure first guess; a prompt of S tokens makes every first round folded
        if (BUG == 0 && (c->p_min > 0.0f || !c->prompt))
            check((c->p_min == 0.0f || (w.stopped > 0 && w.went_on > 0)) &&
                  (c->prompt || w.restarted == runs_n), "end to end, %s%s, %s: of %ld first "
                  "rounds, %ld restarted the cache, %ld stopped drafting early (--draft-p-min), "
                  "%ld drafted 2 or more", c->what, how, served, runs_n, w.restarted,
                  w.stopped, w.went_on);
        // the 1st character comes from the prefill, the 2nd from the first round
        ChiSquare c12 = chi_square(counts12, joint12, V * V, runs_n);
        all_ok &= case_check(c12.pvalue > 1e-4 && c12.zero_hits == 0, "end to "
                             "end, %s%s, trained target, %s, K=%d, %s, %ld runs: joint of "
                             "generated characters 1 and 2 vs the exact joint: X2 = %.1f on %d "
                             "df (%d of %d cells pooled), p-value %.3g, %ld draws of p = 0 "
                             "pairs", c->what, how, shown, K, served, runs_n, c12.stat,
                             c12.cells - 1, c12.pooled, V * V, c12.pvalue, c12.zero_hits);
        ChiSquare cs = chi_square(counts, joint, V * V, runs_n);
        int ok = cs.pvalue > 1e-4 && cs.zero_hits == 0;
        all_ok &= case_check(ok, "end to end, %s%s, trained target, %s, K=%d, %s, %ld runs of "
                             "%s (-n %d; the rounds draft %d or more in %ld runs): joint of "
                             "generated characters 2 and 3 (the first two the speculative "
                             "rounds emit) vs the exact joint of the served distribution from "
                             "plain passes: X2 = %.1f on %d df (%d of %d cells pooled), p-value "
                             "%.3g, %ld draws of p = 0 pairs", c->what, how, shown, K, served,
                             runs_n, c->chain ? "tree_generate's loop (test_tree_generate)"
                                              : "speculative_generate",
                             N_NEW, K, full_rounds, cs.stat, cs.cells - 1, cs.pooled, V * V,
                             cs.pvalue, cs.zero_hits);
        free(seq);
    }
    free_spec_buffers(&b);
    for (int ci = 0; ci < n_cases; ci++) {
        int shared = 0; // free each array once
        for (int j = 0; j < ci; j++) shared |= joints[j] == joints[ci];
        if (!shared) free(joints[ci]);
    }
    free(counts); free(counts12);
    broken_verdict(all_ok, "the loop's characters are not distributed as plain decoding's");
}

// ----------------------------------------------------------------------------
// 3. The copies with hooks are the real loops

// Zeroes the wall times of st, the only fields two runs of the same decoding may differ in.
static void clear_times(RunStats *st) {
    st->core.seconds = st->draft_seconds = 0.0;
    memset(st->core.seconds_in, 0, sizeof(st->core.seconds_in)); // specdec.c's, by kind
    for (int i = 0; i < N_PASS_KINDS; i++) st->pass[i].seconds = 0.0;
    for (int i = 0; i < PASS_SIZES; i++) st->size[i].seconds = 0.0;
}

// test_generate must be speculative_generate, and test_tree_generate tree_generate: the
// same text, counters (but wall times), token sources and final cache lengths (the target's
// and the model draft's) from the same seed, over runs long enough to refill or restart the
// cache many times (and, as a rule, to take k = 0 steps at its last slot).
static void test_copies_faithful(Fixture *fx) {
    if (BUG) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, prompt[64];
    int N_NEW = (SANITIZED ? 2 : 8) * S + 20; // past the first restart, whatever S is
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt), cap = np + N_NEW;
    int *text[2];
    unsigned char *source[2];
    for (int i = 0; i < 2; i++) {
        text[i] = malloc((size_t)cap * sizeof(int));
        source[i] = malloc((size_t)cap);
    }
    // the core
    SpecBuffers b;
    build_spec_buffers(&b, K, V);
    float temps[3] = {1.0f, 0.7f, 0.0f};
    for (int ti = 0; ti < 3; ti++) {
        Stats st[2];
        int kv[2];
        for (int which = 0; which < 2; which++) {
            memset(&st[which], 0, sizeof(Stats));
            memset(text[which], 0xff, (size_t)cap * sizeof(int));
            Rng r;
            rng_seed(&r, 31 + ti);
            DecodeOptions o = {.max_new_tokens = N_NEW, .K = K, .temperature = temps[ti], .rng = &r,
                               .st = &st[which]};
            if (which == 0)
                speculative_generate(g, &fx->draft.bigram, &b, &(Tokens){prompt, np}, &o,
                                     text[0]);
            else
                test_generate(g, &fx->draft.bigram, &b, &(Tokens){prompt, np}, &o, text[1],
                              NULL, NULL);
            st[which].seconds = 0.0; // the timings differ run to run; every count must not
            memset(st[which].seconds_in, 0, sizeof(st[which].seconds_in));
            kv[which] = g->state.cache_len;
        }
        long refills = st[0].target_passes - 1 - st[0].rounds;
        check(memcmp(text[0], text[1], (size_t)cap * sizeof(int)) == 0 &&
              memcmp(&st[0], &st[1], sizeof(Stats)) == 0 && kv[0] == kv[1] && refills > 0,
              "test_generate, bigram draft, t=%g, K=%d, %d tokens: the same text, Stats and "
              "final cache length (%d, %d) as speculative_generate (%ld rounds, %ld accepted, "
              "%ld refill passes)", temps[ti], K, N_NEW, kv[0], kv[1], st[0].rounds,
              st[0].guesses_accepted, refills);
    }
    free_spec_buffers(&b);
    // beyond's chain
    Draft *drafts[3] = {&fx->draft, &fx->gpt, &fx->lookup};
    struct { Sampler s; float p_min; } served[5] = {
        {{1.0f, 0, 0.0f}, 0.0f}, {{0.0f, 0, 0.0f}, 0.0f}, {{1.0f, 5, 0.9f}, 0.0f},
        {{1.0f, 0, 0.0f}, 0.4f}, {{0.7f, 0, 0.0f}, 0.0f}};
    int n_served = SANITIZED ? 4 : 5; // t = 0.7 takes no path t = 1 does not
    for (int di = 0; di < 3; di++) {
        for (int si = 0; si < n_served; si++) {
            Draft *d = drafts[di];
            if (served[si].p_min > 0.0f && d->kind->no_p_min) continue; // not for lookup
            d->p_min = served[si].p_min;
            RunStats st[2];
            int kv[2], kv_draft[2];
            for (int which = 0; which < 2; which++) {
                TreeBuffers tb;
                build_chain(&tb, g, K, d, &served[si].s);
                Output out = {.stream = NULL, .source = source[which], .color = 0};
                memset(&st[which], 0, sizeof(RunStats));
                memset(source[which], 0xff, (size_t)cap);
                memset(text[which], 0xff, (size_t)cap * sizeof(int));
                Rng r;
                rng_seed(&r, 31 + si);
                RunOptions o = {.max_new_tokens = N_NEW, .sampler = served[si].s, .vocab = &fx->vocab,
                                .out = &out, .rng = &r, .st = &st[which]};
                if (which == 0)
                    tree_generate(g, d, &tb, &(Tokens){prompt, np}, &o, text[0]);
                else
                    test_tree_generate(g, d, &tb, &(Tokens){prompt, np}, &o, text[1], NULL,
                                       NULL);
                free_tree_buffers(&tb);
                clear_times(&st[which]); // wall times are the only fields that may differ
                kv[which] = g->state.cache_len;
                kv_draft[which] = d->model.state.cache_len;
            }
            d->p_min = 0.0f;
            int same = memcmp(text[0], text[1], (size_t)cap * sizeof(int)) == 0 &&
                       memcmp(source[0], source[1], (size_t)cap) == 0 &&
                       memcmp(&st[0], &st[1], sizeof(RunStats)) == 0 && kv[0] == kv[1] &&
                       kv_draft[0] == kv_draft[1];
            char name[64];
            sampler_name(name, sizeof(name), &served[si].s);
            if (served[si].p_min > 0.0f)
                snprintf(name + strlen(name), sizeof(name) - strlen(name), " p_min %g",
                         served[si].p_min);
            const RunStats *sa = &st[0];
            check(same && sa->core.rounds > 0 && sa->pass[PASS_FOLDED].passes > 0,
                  "test_tree_generate, chain of %d, %s draft, %s, %d tokens: the same text, "
                  "token sources, RunStats and final cache lengths (target %d, %d; draft %d, "
                  "%d) as tree_generate (%ld rounds, %ld empty, %ld accepted, %ld draft "
                  "passes, %ld PASS_FOLDED rounds that restarted the cache, %ld PASS_STEP "
                  "rounds of one token)", K, d->name, name, N_NEW, kv[0], kv[1], kv_draft[0],
                  kv_draft[1], sa->core.rounds, sa->empty_rounds, sa->core.guesses_accepted,
                  sa->draft_passes, sa->pass[PASS_FOLDED].passes, sa->pass[PASS_STEP].passes);
        }
    }
    for (int i = 0; i < 2; i++) {
        free(text[i]);
        free(source[i]);
    }
}

// ----------------------------------------------------------------------------
// 4. Edge cases

// accept_reject on one candidate with forced uniforms u (accept draw, then resample).
static int forced_accept(SpecBuffers *b, int V, int cand, const float *q, const float *p,
                         double u_accept, double u_next, int allow_bonus) {
    double u[2] = {u_accept, u_next};
    Rng r;
    rng_seed(&r, 1);
    rng_force(&r, u, 2);
    b->candidates[0] = cand;
    memcpy(b->draft_probs, q, (size_t)V * sizeof(float));
    memcpy(b->target_probs, p, (size_t)V * sizeof(float));
    memcpy(b->target_probs + V, p, (size_t)V * sizeof(float));
    return accept_reject(b, 1, allow_bonus, &r);
}

static void test_forced_edges(void) {
    if (BUG) return;
    enum { V = 5 };
    SpecBuffers b;
    build_spec_buffers(&b, 1, V);
    // p/q at candidate 0 is 1/3; the residual max(0, p - q) = {0, .2, 0, .2, 0}
    float p[V] = {0.1f, 0.4f, 0.2f, 0.3f, 0.0f}, q[V] = {0.3f, 0.2f, 0.2f, 0.1f, 0.2f};
    int n1 = forced_accept(&b, V, 0, q, p, 0.0, 0.0, 0), r1 = b.rejected_at;
    int n2 = forced_accept(&b, V, 0, q, p, U_BELOW_1, 0.0, 0), r2 = b.rejected_at,
        t2 = b.emitted[0];
    int n3 = forced_accept(&b, V, 0, q, p, U_BELOW_1, U_BELOW_1, 0), t3 = b.emitted[0];
    int n4 = forced_accept(&b, V, 4, q, p, 0.0, 0.0, 0), r4 = b.rejected_at, t4 = b.emitted[0];
    check(n1 == 1 && r1 == -1 && n2 == 1 && r2 == 0 && t2 == 1 && n3 == 1 && t3 == 3 &&
          n4 == 1 && r4 == 0 && t4 == 1,
          "forced u: p/q = 1/3 accepts at u = 0 (rejected_at %d), rejects at u = 1-2^-53 "
          "(rejected_at %d); the residual {0,.2,0,.2,0} gives token %d at u = 0 and %d at "
          "u = 1-2^-53 (want 1, 3); p(c) = 0 rejects even at u = 0 (rejected_at %d, then %d)",
          r1, r2, t2, t3, r4, t4);
    // the bonus at the ends of [0, 1): the first and last tokens with mass
    int nb0 = forced_accept(&b, V, 1, q, p, 0.0, 0.0, 1), b0 = b.emitted[1];
    int nb1 = forced_accept(&b, V, 1, q, p, 0.0, U_BELOW_1, 1), b1 = b.emitted[1];
    check(nb0 == 2 && nb1 == 2 && b0 == 0 && b1 == 3, "forced u: the bonus after an accepted "
          "candidate is token %d at u = 0 and %d at u = 1-2^-53 (want 0 and 3: 4 has p = 0)",
          b0, b1);
    // a residual with no mass: p <= q everywhere (p sums to 1 - 2^-24 in float)
    float qz[2] = {0.5f, 0.5f}, pz[2] = {0.5f, 0.5f - 0x1p-24f};
    SpecBuffers b2;
    build_spec_buffers(&b2, 1, 2);
    int nz0 = forced_accept(&b2, 2, 1, qz, pz, U_BELOW_1, 0.0, 0), z0 = b2.emitted[0],
        rz = b2.rejected_at;
    int nz1 = forced_accept(&b2, 2, 1, qz, pz, U_BELOW_1, U_BELOW_1, 0), z1 = b2.emitted[0];
    int finite = b2.adjusted[0] == 0.0 && b2.adjusted[1] == 0.0;
    check(nz0 == 1 && rz == 0 && z0 == 0 && nz1 == 1 && z1 == 1 && finite,
          "a residual that sums to zero (p <= q everywhere): the rejection (rejected_at %d) "
          "draws from p instead, token %d at u = 0 and %d at u = 1-2^-53 (want 0, 1), "
          "residual row all zero, no NaN", rz, z0, z1);
    free_spec_buffers(&b);
    free_spec_buffers(&b2);
}


// Greedy speculative text == greedy plain text, for one prompt, K and length: the core's
// speculative_generate (chain NULL, the bigram draft d->bigram) or beyond's chain of K
// (run_tree with chain_shape(K)) against plain decoding (generate). *sp_out: the loop's
// counters (the core's Stats; the chain's RunStats in *rs_out). *diff_at: the index of the
// first generated token that differs, or -1.
static int greedy_same(Fixture *fx, Draft *d, int chain, const int *prompt, int np, int K,
                       int max_new_tokens, Stats *sp_out, RunStats *rs_out, int *diff_at) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, start = np > 0 ? np : 1, cap = start + max_new_tokens;
    int *a = malloc((size_t)cap * sizeof(int)), *c = malloc((size_t)cap * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    Stats sp, pl;
    RunStats rs;
    memset(&sp, 0, sizeof(sp));
    memset(&pl, 0, sizeof(pl));
    memset(&rs, 0, sizeof(rs));
    Rng r;
    if (chain) {
        TreeShape shape = chain_shape(K);
        run_tree(g, d, &shape, &(Tokens){prompt, np}, (Sampler){0.0f, 0, 0.0f}, 5, max_new_tokens, a,
                 &rs);
        sp = rs.core;
    } else {
        SpecBuffers b;
        build_spec_buffers(&b, K, V);
        rng_seed(&r, 5);
        DecodeOptions o = {.max_new_tokens = max_new_tokens, .K = K, .rng = &r, .st = &sp};
        speculative_generate(g, &d->bigram, &b, &(Tokens){prompt, np}, &o, a);
        free_spec_buffers(&b);
    }
    rng_seed(&r, 5);
    DecodeOptions o = {.max_new_tokens = max_new_tokens, .K = K, .rng = &r, .st = &pl};
    generate(g, &(Tokens){prompt, np}, &o, c, p);
    int same = sp.emitted == max_new_tokens && pl.emitted == max_new_tokens &&
               memcmp(a, c, (size_t)cap * sizeof(int)) == 0;
    *diff_at = -1;
    for (int i = start; i < cap && *diff_at < 0; i++)
        if (a[i] != c[i]) *diff_at = i - start;
    if (sp_out) *sp_out = sp;
    if (rs_out) *rs_out = rs;
    free(a); free(c); free(p);
    return same;
}

// " (the first difference at generated token N)", or "" when there is none.
static const char *diff_note(char *buf, size_t n, int diff_at) {
    if (diff_at < 0) return "";
    snprintf(buf, n, " (the first difference at generated token %d)", diff_at);
    return buf;
}

// The core's refill passes in a run: every target pass but the prefill and the rounds'.
static long refills(const Stats *st) { return st->target_passes - 1 - st->rounds; }

// Greedy decoding, where speculative decoding must give plain decoding's text token for
// token. The core (BREAK_TRIM must change its text): K against the tokens still needed and
// the cache's room, a draft that never agrees. Beyond's chain (BREAK_FOLD must change its
// text): each draft (with --draft-p-min too), a prompt that fills the context. Every run
// but the first refills or restarts the cache.
static void test_edge_runs(Fixture *fx) {
    if (!runs(CATCH_FOLD | CATCH_TRIM)) return;
    GPT *g = &fx->model;
    int S = g->config.block_size, V = g->config.vocab_size, prompt[64], at, all_ok = 1;
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    char dn[80];
    Stats st;
    RunStats rs;
    if (runs(CATCH_TRIM)) {
        // K larger than what is still needed: a round drafts only what is wanted
        int ok = greedy_same(fx, &fx->draft, 0, prompt, np, 8, 3, &st, NULL, &at);
        all_ok &= case_check(ok && st.emitted == 3 && st.drafted <= 2, "core, K = 8 with -n 3: "
                             "%ld tokens, %ld drafted in %ld rounds (at most 2 still needed), "
                             "same text as plain greedy%s", st.emitted, st.drafted, st.rounds,
                             diff_note(dn, sizeof(dn), at));
        ok = greedy_same(fx, &fx->draft, 0, prompt, np, 1, 200, &st, NULL, &at);
        all_ok &= case_check(ok && st.drafted <= st.rounds && st.round_tokens <= 2 * st.rounds &&
                             refills(&st) > 0,
                             "core, K = 1: 200 greedy tokens equal plain decoding%s; %ld rounds "
                             "drafted at most one token each (%ld drafted: none at the cache's "
                             "last slot) and emitted %ld; %ld refill passes",
                             diff_note(dn, sizeof(dn), at), st.rounds, st.drafted,
                             st.round_tokens, refills(&st));
        // K = S - 1: every round is cut to the cache's room
        ok = greedy_same(fx, &fx->draft, 0, prompt, np, S - 1, 200, &st, NULL, &at);
        all_ok &= case_check(ok && refills(&st) > 0, "core, K = block_size - 1 = %d: 200 greedy "
                             "tokens equal plain decoding%s (%ld rounds, %ld drafted, %ld refill "
                             "passes)", S - 1, diff_note(dn, sizeof(dn), at), st.rounds,
                             st.drafted, refills(&st));
        // a draft that never agrees: every row one-hot at a token greedy decoding never emits
        int plain_seq[512];
        float *p = malloc((size_t)V * sizeof(float));
        Stats pl;
        memset(&pl, 0, sizeof(pl));
        Rng r;
        rng_seed(&r, 1);
        DecodeOptions o = {.max_new_tokens = 300, .K = 4, .rng = &r, .st = &pl};
        generate(g, &(Tokens){prompt, np}, &o, plain_seq, p);
        int seen[256] = {0}, never = -1;
        for (int i = 0; i < np + 300; i++) seen[plain_seq[i]] = 1;
        for (int x = V - 1; x >= 0 && never < 0; x--) if (!seen[x]) never = x;
        float *table = malloc((size_t)V * V * sizeof(float));
        for (int i = 0; i < V * V; i++) table[i] = (i % V) == never ? 1.0f : 0.0f;
        Draft contrary = {.kind = find_draft("bigram"), .name = "contrary", .V = V,
                          .bigram = {V, table}};
        ok = never >= 0 && greedy_same(fx, &contrary, 0, prompt, np, 4, 300, &st, NULL, &at);
        all_ok &= case_check(ok && st.guesses_accepted == 0 && st.round_tokens == st.rounds &&
                             st.bonus == 0 && refills(&st) > 0, "core, a draft that never agrees "
                             "(always '%c'): 300 greedy tokens equal plain decoding%s; %ld "
                             "rounds, %ld accepted, %ld round tokens (exactly one per round), "
                             "%ld refill passes", never >= 0 ? fx->vocab.chars[never] : '?',
                             diff_note(dn, sizeof(dn), at), st.rounds, st.guesses_accepted,
                             st.round_tokens, refills(&st));
        free(table);
        free(p);
    }
    if (runs(CATCH_FOLD)) {
        // every draft, greedy: the model draft's cache and lookup's short rounds change no
        // token, and neither does --draft-p-min (it reads only the draft)
        struct { Draft *d; float p_min; } drafts[5] = {{&fx->draft, 0.0f}, {&fx->gpt, 0.0f},
            {&fx->lookup, 0.0f}, {&fx->draft, 0.3f}, {&fx->gpt, 0.7f}};
        for (int di = 0; di < 5; di++) {
            int max_new_tokens = SANITIZED ? 100 : 300;
            drafts[di].d->p_min = drafts[di].p_min;
            int ok = greedy_same(fx, drafts[di].d, 1, prompt, np, 4, max_new_tokens, NULL, &rs, &at);
            drafts[di].d->p_min = 0.0f;
            char how[48] = "";
            if (drafts[di].p_min > 0.0f)
                snprintf(how, sizeof(how), " with --draft-p-min %g", drafts[di].p_min);
            all_ok &= case_check(ok && rs.core.rounds > 0 && rs.pass[PASS_FOLDED].passes > 0,
                                 "chain, %s draft%s, K = 4: %d greedy tokens equal plain "
                                 "decoding%s (%ld rounds, %ld empty, %ld drafted, %ld accepted, "
                                 "%ld draft passes, %ld PASS_FOLDED, %ld PASS_STEP)",
                                 drafts[di].d->name, how, max_new_tokens, diff_note(dn, sizeof(dn), at),
                                 rs.core.rounds, rs.empty_rounds, rs.core.drafted,
                                 rs.core.guesses_accepted, rs.draft_passes, rs.pass[PASS_FOLDED].passes,
                                 rs.pass[PASS_STEP].passes);
        }
        // a prompt of exactly S tokens: the cache is full after the prefill, and the first
        // round restarts it (with every draft)
        int full[64];
        memcpy(full, fx->corpus.tokens + CORPUS_AT, (size_t)S * sizeof(int));
        for (int di = 0; di < 3; di++) {
            int max_new_tokens = SANITIZED ? 50 : 100;
            int ok = greedy_same(fx, drafts[di].d, 1, full, S, 4, max_new_tokens, NULL, &rs, &at);
            all_ok &= case_check(ok && rs.pass[PASS_FOLDED].passes > 0, "chain, a prompt that "
                                 "fills the context (%d tokens), %s draft, K = 4: %d greedy "
                                 "tokens equal plain decoding%s (%ld PASS_FOLDED rounds "
                                 "restarted the cache, the first of them round 1)", S,
                                 drafts[di].d->name, max_new_tokens, diff_note(dn, sizeof(dn), at),
                                 rs.pass[PASS_FOLDED].passes);
        }
    }
    broken_verdict(all_ok, "greedy speculative text differs from plain greedy text");
}

// The target as its own draft, in the core: the draft rows come from one-token target
// passes at the decoding temperature, as the verify pass makes its rows, which recomputes
// them bit for bit, so every candidate passes.
static void test_self_draft(Fixture *fx) {
    if (BUG) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    SpecBuffers b;
    build_spec_buffers(&b, K, V);
    float temps[2] = {1.0f, 0.7f};
    for (int ti = 0; ti < 2; ti++) {
        float t = temps[ti];
        Rng r;
        rng_seed(&r, 77 + ti);
        g->state.cache_len = 0;
        const float *lg = forward(g, prompt, np);
        int current = sample_token(lg + (size_t)(np - 1) * V, V, t, b.target_probs, &r);
        long rounds = 0, all_in = 0, rows_equal = 0, emitted = 0;
        while (S - 1 - g->state.cache_len >= K) {
            int before = g->state.cache_len, tok = current;
            // draft with the target itself, one token at a time, then forget those passes
            for (int i = 0; i < K; i++) {
                tempered_softmax(b.draft_probs + (size_t)i * V, forward(g, &tok, 1), V, t);
                tok = b.candidates[i] = sample_from(b.draft_probs + (size_t)i * V, V,
                                                    rng_uniform(&r));
            }
            trim_kv_cache(g, before, 0);
            verify_candidates(g, current, K, t, &b);
            rows_equal += memcmp(b.target_probs, b.draft_probs, (size_t)K * V * sizeof(float)) == 0;
            int n = accept_reject(&b, K, 1, &r);
            trim_kv_cache(g, n, before);
            all_in += n == K + 1 && b.rejected_at < 0;
            emitted += n;
            current = b.emitted[n - 1];
            rounds++;
        }
        check(rounds > 0 && all_in == rounds && rows_equal == rounds,
              "self-draft t=%g: the target drafting for itself: %ld of %ld rounds accepted "
              "all %d drafts and took the bonus (%ld tokens), verify rows == draft rows bit for "
              "bit in %ld rounds", t, all_in, rounds, K, emitted, rows_equal);
    }
    free_spec_buffers(&b);
}

// ----------------------------------------------------------------------------
// 5. The KV cache and the verify rows after every round, and the counters

// The cache and rows test's view of a run: the fresh models, what plain decoding's
// context rule says the cache holds, and its own tallies of what the rounds did.
typedef struct {
    GPT fresh;           // the same weights, its own cache: the fresh passes
    GPT fresh_draft;     // the same for a model draft (unused for a table or lookup)
    const Draft *d;
    int chain;           // 1: beyond's chain (test_tree_generate), 0: the core (test_generate)
    Sampler s;           // how the rows are served
    int K, first, max_new_tokens; // the draft length; where the generated text starts, its length
    int *toks;           // (first + max_new_tokens + K) scratch: the text before a round, its guesses
    float *row;          // (V) scratch: one served row of a fresh pass
    int rule_kv;         // the rule's cache length before the next round's current_token
    int n_prev;          // the text's length before the round
    long rounds, bad_cache, bad_rows, first_bad, draft_checked;
    long restarts, edge, zero_rounds, stopped, bad_asked, refills; // by the rule, and the code's k
    long drafted, accepted, resampled, bonus, round_tokens;        // the test's own count
    PassTally kind[N_PASS_KINDS], size[PASS_SIZES]; // the chain's target passes by the rule
    double sum_beta, var_beta; // sum over judged positions of beta and beta (1 - beta)
    long judged;
} CacheWatch;

// Whether the first n positions of g's cache equal fresh's after a prefill over toks,
// bit for bit, every layer, keys and values (keys and values by position: (L, S, C)).
static int cache_equals_prefill(const GPT *g, GPT *fresh, const int *toks, int n) {
    const Config *c = &g->config;
    size_t S = c->block_size, C = c->n_embd;
    fresh->state.cache_len = 0;
    if (n > 0) forward(fresh, toks, n);
    int ok = 1;
    for (int l = 0; l < c->n_layer && ok; l++) {
        size_t off = l * S * C, bytes = (size_t)n * C * sizeof(float);
        ok = memcmp(g->state.key_cache + off, fresh->state.key_cache + off, bytes) == 0 &&
             memcmp(g->state.value_cache + off, fresh->state.value_cache + off, bytes) == 0;
    }
    return ok;
}

// Adds a target pass of T tokens to a kind's tally and a size's (as tally_pass sorts them).
static void tally(CacheWatch *w, PassKind kind, int T) {
    PassTally *by_size = &w->size[T < PASS_SIZES - 1 ? T : PASS_SIZES - 1];
    w->kind[kind].passes++;
    w->kind[kind].tokens += T;
    by_size->passes++;
    by_size->tokens += T;
}

// After every round of either loop. The round began with the text seq[0 .. n_prev-1]
// (current_token last) and a cache that plain decoding's rule says holds rule_kv tokens:
// a full cache (S) restarts, so the round's context is the S/2 - 1 tokens before
// current_token (the refill's window), else those rule_kv tokens. It drafted k guesses
// cand, verified them into the served rows p (k+1 rows of V), whose guesses came from the
// rows q (k rows), judged `judged` positions and accepted `accepted` guesses; `restarted`
// says the code found the cache full, `top` that its guesses are judged as sure ones (the
// chain's tb->top), `stopped` that --draft-p-min ended the drafting. Checks, bit for bit:
// the rows p against plain decoding's rows on a fresh model, current_token and then each
// guess fed one by one by the rule (plain_feed) on top of that context; the live cache's
// length against the rule fed every token the round emitted but the last, and its
// contents against a fresh prefill over those tokens; a model draft's cache against a
// fresh prefill of the draft over the first of them (it may lag, never run ahead). Counts
// the round's pass by the rule, checks the guesses asked for (K, the tokens still needed,
// and the room S - 1 - context), and adds up beta over the judged positions.
static void watch_common(CacheWatch *w, const GPT *g, const int *seq, int n_seq, int k,
                         const int *cand, const float *p, const float *q, int judged,
                         int accepted, int restarted, int top, int stopped, int n) {
    int kv = g->state.cache_len, V = g->config.vocab_size, S = g->config.block_size;
    int n_prev = w->n_prev;
    int restart = w->rule_kv == S, context = restart ? S / 2 - 1 : w->rule_kv;
    int remaining = w->max_new_tokens - (n_prev - w->first), asked = w->K;
    if (asked > remaining) asked = remaining;
    if (asked > S - 1 - context) asked = S - 1 - context;
    w->rounds++;
    if (w->chain) // fewer only when --draft-p-min stopped it or lookup's text ran out
        w->bad_asked += k > asked ||
                        (k < asked && !stopped && w->d->kind != find_draft("lookup"));
    else
        w->bad_asked += k != asked;
    w->bad_asked += restarted != restart;
    // the rows: the context, then current_token and the guesses fed one by one
    memcpy(w->toks, seq, (size_t)n_prev * sizeof(int));
    memcpy(w->toks + n_prev, cand, (size_t)k * sizeof(int));
    w->fresh.state.cache_len = 0;
    if (restart) w->fresh.state.cache_len = S; // full: the first feed refills it
    else if (w->rule_kv > 0) forward(&w->fresh, w->toks + n_prev - 1 - w->rule_kv, w->rule_kv);
    int rows_ok = 1;
    for (int i = 0; i <= k; i++) {
        served_probs(w->row, plain_feed(&w->fresh, w->toks, n_prev + i), V, &w->s);
        rows_ok &= memcmp(w->row, p + (size_t)i * V, (size_t)V * sizeof(float)) == 0;
    }
    // the cache: the rule fed current_token and every emitted token but the last
    int after = w->rule_kv;
    for (int j = n_prev - 1; j <= n_seq - 2; j++) after = after == S ? S / 2 : after + 1;
    const int *window = seq + n_seq - 1 - after; // the tokens the target's cache must hold
    int cache_ok = kv == after && cache_equals_prefill(g, &w->fresh, window, after);
    if (cache_ok && w->d->model.params) { // the gpt draft's cache, the cascade's
        const GPT *m = &w->d->model;
        int kvd = m->state.cache_len;
        cache_ok = kvd >= 0 && kvd <= kv && cache_equals_prefill(m, &w->fresh_draft, window, kvd);
        w->draft_checked++;
    }
    w->bad_cache += !cache_ok;
    w->bad_rows += !rows_ok;
    if ((!cache_ok || !rows_ok) && w->first_bad == 0) w->first_bad = w->rounds;
    // the round's passes, by the rule: the core refills in a pass of its own (S/2 - 1
    // tokens, none for S < 4) then verifies 1 + k; the chain folds them into one pass
    int lag = restart ? S / 2 - 1 : 0;
    w->refills += restart && lag > 0;
    tally(w, restart ? (k > 0 ? PASS_FOLDED : PASS_REFILL) : k > 0 ? PASS_VERIFY : PASS_STEP,
          lag + 1 + k);
    w->restarts += restart;
    w->edge += context == S - 1;
    w->zero_rounds += k == 0;
    w->stopped += stopped;
    // the round's own count: what it emitted, by the rule of accept/reject
    w->drafted += k;
    w->accepted += accepted;
    w->resampled += judged > accepted;
    w->bonus += k > 0 && n == k + 1;
    w->round_tokens += n;
    // the judged positions: up to and including a rejected one
    for (int i = 0; i < judged; i++) {
        double beta = 0.0;
        if (top) beta = p[(size_t)i * V + cand[i]]; // a sure guess passes with p(x)
        else
            for (int x = 0; x < V; x++) beta += fmin(p[(size_t)i * V + x], q[(size_t)i * V + x]);
        w->sum_beta += beta;
        w->var_beta += beta * (1.0 - beta);
        w->judged++;
    }
    w->rule_kv = after;
    w->n_prev = n_seq;
}

// test_generate's hook: the core's round.
static void watch_core_round(void *ctx, const GPT *g, const SpecBuffers *b, const CoreRound *r,
                             const int *seq, int n_seq) {
    int rej = b->rejected_at;
    watch_common(ctx, g, seq, n_seq, r->k, b->candidates, b->target_probs, b->draft_probs,
                 rej >= 0 ? rej + 1 : r->k, rej >= 0 ? rej : r->k, r->refilled, 0, 0,
                 r->num_accepted);
}

// test_tree_generate's hook: the chain's round (row i of a chain is at depth i, so its
// p and q rows are the chain's positions in order).
static void watch_chain_round(void *ctx, const GPT *g, const TreeBuffers *tb, int n,
                              const int *seq, int n_seq) {
    int judged = tb->passed + (n > tb->passed && tb->n_children[tb->path[tb->passed]] > 0);
    watch_common(ctx, g, seq, n_seq, tb->rows - 1, tb->token + 1, tb->p, tb->q, judged,
                 tb->passed, tb->restarted, tb->top, tb->stopped, n);
}

// A copy of m's weights with a cache of its own.
static void clone_gpt(GPT *out, const GPT *m) {
    if (build_gpt(out, &m->config) != 0) {
        fprintf(stderr, "test_exact: out of memory for a fresh model\n");
        exit(1);
    }
    memcpy(out->params, m->params, m->n_params * sizeof(float));
}

// Whether the RunStats' passes, by kind and by size, are the test's tally by the rule
// (and its prefill).
static int passes_match(const RunStats *st, const CacheWatch *w) {
    int ok = 1;
    for (int i = 0; i < N_PASS_KINDS; i++)
        ok &= st->pass[i].passes == w->kind[i].passes && st->pass[i].tokens == w->kind[i].tokens;
    for (int i = 0; i < PASS_SIZES; i++)
        ok &= st->size[i].passes == w->size[i].passes && st->size[i].tokens == w->size[i].tokens;
    return ok;
}

static void test_cache_and_stats(Fixture *fx) {
    if (!runs(CATCH_TRIM | CATCH_FOLD)) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    struct { int chain; Draft *d; float p_min; Sampler s; int max_new_tokens, n_new_san; } cases[] = {
        {0, &fx->draft, 0.0f, {1.0f, 0, 0.0f}, 2000, 120},
        {0, &fx->draft, 0.0f, {0.7f, 0, 0.0f}, 2000, 100},
        {0, &fx->draft, 0.0f, {0.0f, 0, 0.0f}, 2000, 100},
        {1, &fx->draft, 0.0f, {1.0f, 0, 0.0f}, 1000, 50},
        {1, &fx->gpt, 0.0f, {1.0f, 0, 0.0f}, 1000, 50},
        {1, &fx->gpt, 0.0f, {1.0f, 5, 0.9f}, 1000, 50},
        {1, &fx->gpt, 0.7f, {1.0f, 0, 0.0f}, 1000, 50},
        {1, &fx->lookup, 0.0f, {1.0f, 0, 0.0f}, 1000, 50},
        {1, &fx->exit, 0.0f, {1.0f, 0, 0.0f}, 1000, 80}, // sure drafts: fewer rounds a token
        {1, &fx->eagle, 0.0f, {1.0f, 5, 0.9f}, 1000, 80},
        {1, &fx->cascade, 0.0f, {1.0f, 0, 0.0f}, 1000, 80},
    };
    int n_cases = (int)(sizeof(cases) / sizeof(cases[0])), all_ok = 1;
    long all_restarts = 0, all_edge = 0;
    SpecBuffers b;
    build_spec_buffers(&b, K, V);
    for (int ci = 0; ci < n_cases; ci++) {
        if (!runs(cases[ci].chain ? CATCH_FOLD : CATCH_TRIM)) continue;
        int N_NEW = SANITIZED ? cases[ci].n_new_san : cases[ci].max_new_tokens;
        Draft *d = cases[ci].d;
        int *seq = malloc((size_t)(np + N_NEW) * sizeof(int));
        CacheWatch w;
        memset(&w, 0, sizeof(w));
        clone_gpt(&w.fresh, g);
        if (d->model.params) clone_gpt(&w.fresh_draft, &d->model); // gpt, cascade
        w.d = d;
        w.chain = cases[ci].chain;
        w.s = cases[ci].s;
        w.K = K;
        w.first = np > 0 ? np : 1;
        w.max_new_tokens = N_NEW;
        w.toks = malloc((size_t)(np + N_NEW + K) * sizeof(int));
        w.row = malloc((size_t)V * sizeof(float));
        w.rule_kv = w.first < S ? w.first : S; // the prefill: the prompt's last S tokens
        w.n_prev = w.first + 1;                // and the token sampled from it
        tally(&w, PASS_PREFILL, w.rule_kv);
        Rng r;
        rng_seed(&r, 4242 + ci);
        d->p_min = cases[ci].p_min;
        Stats core;
        RunStats rs;
        memset(&core, 0, sizeof(core));
        memset(&rs, 0, sizeof(rs));
        if (w.chain) {
            TreeBuffers tb;
            build_chain(&tb, g, K, d, &w.s);
            RunOptions o = {.max_new_tokens = N_NEW, .sampler = w.s, .rng = &r, .st = &rs};
            test_tree_generate(g, d, &tb, &(Tokens){prompt, np}, &o, seq, watch_chain_round, &w);
            free_tree_buffers(&tb);
            core = rs.core;
        } else {
            DecodeOptions o = {.max_new_tokens = N_NEW, .K = K, .temperature = w.s.temperature,
                               .rng = &r, .st = &core};
            test_generate(g, &d->bigram, &b, &(Tokens){prompt, np}, &o, seq, watch_core_round,
                          &w);
        }
        const Stats *st = &core;
        d->p_min = 0.0f;
        all_restarts += w.restarts;
        all_edge += w.edge;
        char first[64] = "", name[96], draft_note[96] = "";
        if (w.first_bad) snprintf(first, sizeof(first), "; the first in round %ld", w.first_bad);
        if (w.draft_checked)
            snprintf(draft_note, sizeof(draft_note), ", and the draft's cache a fresh prefill "
                     "of the draft over the first of them (%ld times)", w.draft_checked);
        sampler_name(name, sizeof(name), &cases[ci].s);
        if (cases[ci].p_min > 0.0f)
            snprintf(name + strlen(name), sizeof(name) - strlen(name), ", --draft-p-min %g "
                     "(stopped %ld drafts early)", cases[ci].p_min, w.stopped);
        char dn[64];
        snprintf(dn, sizeof(dn), "%s, %s", w.chain ? "chain" : "core", d->name);
        all_ok &= case_check(w.rounds > 0 && w.bad_cache == 0 && w.bad_rows == 0 &&
                             st->rounds > N_NEW / 4 && w.restarts > 0,
                             "KV cache and verify rows, %s draft, %s, K=%d, %d tokens: after "
                             "each of %ld rounds (%ld found the cache full: %s; %ld k = 0 steps "
                             "at the cache's last slot) the round's k+1 served rows equal plain "
                             "decoding's from fresh passes over the rule's context, the target's "
                             "cache has the rule's length and equals a fresh prefill over the "
                             "same tokens, bit for bit, every layer, keys and values%s (%ld "
                             "rounds differ in the cache, %ld in the rows%s)", dn, name, K,
                             N_NEW, w.rounds, w.restarts, w.chain ? "a folded verify pass on "
                             "the refill's window" : "a refill pass, then the verify pass",
                             w.edge, draft_note, w.bad_cache, w.bad_rows, first);
        if (BUG == 0) {
            long empty = w.chain ? rs.empty_rounds : 0; // rounds with room and no guess
            long x = st->rounds - st->resampled - st->bonus - w.zero_rounds;
            // one pass a guess for a draft that runs blocks (gpt, the exit, EAGLE, and
            // EAGLE-3's one pass for the prefill window's rows); the cascade's inner rounds
            // are its own to count
            long passes = d->kind == find_draft("cascade") ? rs.draft_passes
                          : d->kind->restart || d->kind->verify
                              ? st->drafted + (d->eagle.n_feat == 3) : 0;
            check(st->emitted == N_NEW && st->emitted == 1 + st->round_tokens &&
                  st->round_tokens == st->guesses_accepted + st->resampled + st->bonus + w.zero_rounds &&
                  x >= 0 && x <= 1 && w.zero_rounds == empty + w.edge &&
                  st->guesses_accepted + st->resampled == w.judged && st->rounds == w.rounds &&
                  st->drafted == w.drafted && st->guesses_accepted == w.accepted &&
                  st->resampled == w.resampled && st->bonus == w.bonus &&
                  st->round_tokens == w.round_tokens && (!w.chain || rs.draft_passes == passes) &&
                  w.bad_asked == 0,
                  "counters, %s draft, %s: emitted %ld = 1 + %ld round tokens; round tokens = "
                  "accepted %ld + resampled %ld + bonus %ld + k = 0 rounds %ld (empty %ld, at the "
                  "cache's last slot %ld); rounds %ld = resampled + bonus + k = 0 + %ld; judged "
                  "positions %ld = accepted + resampled; drafted %ld, accepted, resampled, bonus "
                  "and round tokens as the test counted them; draft passes %ld (%ld expected: "
                  "one per guess of a model draft); %ld rounds asked for other than min(K, "
                  "tokens still needed, S - 1 - context) guesses or restarted off the rule", dn,
                  name, st->emitted, st->round_tokens, st->guesses_accepted, st->resampled, st->bonus,
                  w.zero_rounds, empty, w.edge, st->rounds, x, w.judged, st->drafted,
                  w.chain ? rs.draft_passes : 0, passes, w.bad_asked);
            // the target's passes: the prefill, one per round, and the core's refills
            if (w.chain)
                check(st->target_passes == 1 + st->rounds && passes_match(&rs, &w),
                      "passes, %s draft, %s: %ld target passes = the prefill + one per round; "
                      "by kind (passes/tokens) prefill %ld/%ld, refill %ld/%ld, folded %ld/%ld, "
                      "verify %ld/%ld, step %ld/%ld, and by size, as the rule sorts them (the "
                      "test's tally: folded %ld/%ld, verify %ld/%ld, step %ld/%ld)", dn, name,
                      st->target_passes, rs.pass[PASS_PREFILL].passes,
                      rs.pass[PASS_PREFILL].tokens, rs.pass[PASS_REFILL].passes,
                      rs.pass[PASS_REFILL].tokens, rs.pass[PASS_FOLDED].passes,
                      rs.pass[PASS_FOLDED].tokens, rs.pass[PASS_VERIFY].passes,
                      rs.pass[PASS_VERIFY].tokens, rs.pass[PASS_STEP].passes,
                      rs.pass[PASS_STEP].tokens, w.kind[PASS_FOLDED].passes,
                      w.kind[PASS_FOLDED].tokens, w.kind[PASS_VERIFY].passes,
                      w.kind[PASS_VERIFY].tokens, w.kind[PASS_STEP].passes,
                      w.kind[PASS_STEP].tokens);
            else
                check(st->target_passes == 1 + st->rounds + w.refills && w.refills > 0,
                      "passes, %s draft, %s: %ld target passes = the prefill + one per round "
                      "(%ld) + a refill pass per full cache (%ld)", dn, name,
                      st->target_passes, st->rounds, w.refills);
            // the Stats' own alpha: the same positions, the same sum, in the same order
            double alpha = w.judged ? w.sum_beta / w.judged : 0.0;
            check(st->judged == w.judged && st->judged == st->guesses_accepted + st->resampled &&
                  fabs(st->alpha_sum - w.sum_beta) <= 1e-9 * (1.0 + w.sum_beta) &&
                  fabs(stats_alpha(st) - alpha) <= 1e-12,
                  "alpha, %s draft, %s: Stats.judged %ld == %ld judged positions seen after "
                  "each round; Stats.alpha_sum %.6f == the test's sum of the chance each "
                  "judged guess had %.6f; stats_alpha %.6f == %.6f", dn, name, st->judged,
                  w.judged, st->alpha_sum, w.sum_beta, stats_alpha(st), alpha);
            double sigma = sqrt(w.var_beta), dev = fabs(st->guesses_accepted - w.sum_beta);
            check(dev <= 4.5 * sigma + 1e-9, "acceptance, %s draft, %s: %ld accepted of %ld "
                  "judged positions vs the sum of their chances = %.1f (sd %.1f): %.2f sigma; "
                  "rate %.4f accepted/drafted", dn, name, st->guesses_accepted, w.judged, w.sum_beta,
                  sigma, sigma > 0 ? dev / sigma : 0.0,
                  st->drafted ? (double)st->guesses_accepted / st->drafted : 0.0);
            if (cases[ci].p_min > 0.0f)
                check(w.stopped > 0, "--draft-p-min %g, %s draft: %ld of %ld rounds stopped "
                      "drafting early (the cache and rows above cover them)", cases[ci].p_min,
                      dn, w.stopped, w.rounds);
        }
        free_gpt(&w.fresh);
        if (d->model.params) free_gpt(&w.fresh_draft);
        free(w.toks);
        free(w.row);
        free(seq);
    }
    if (BUG == 0)
        check(all_restarts > 0 && all_edge > 0, "the cache runs above watched %ld rounds that "
              "found the cache full (refilled or folded) and %ld k = 0 rounds at the cache's "
              "last slot", all_restarts, all_edge);
    free_spec_buffers(&b);
    broken_verdict(all_ok, "the rows or the cache of a round differ from plain decoding's");
}

// ----------------------------------------------------------------------------
// 6. test/explain: the numbers it prints for Nain's table

// explain_position's exact column must be p itself (the identity notes/math.md derives),
// with acceptance sum min(p, q) = 0.45; its measured column (200,000 draft_tokens +
// accept_reject runs: this build's, so a broken build's mutated ones) must fit that by
// chi-square. At t = 0 both rows are one-hot at different tokens: the draft's B is never
// accepted, the target's C always emitted.
static void test_explain(void) {
    if (!runs(CATCH_RESIDUAL | CATCH_RATIO)) return;
    double exact[EXPLAIN_V], want[EXPLAIN_V], beta, worst = 0.0;
    long counts[EXPLAIN_V], n_acc, rounds = EXPLAIN_ROUNDS;
    explain_position(NULL, "", EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 1.0f, rounds, 1,
                     exact, &beta, counts, &n_acc);
    for (int x = 0; x < EXPLAIN_V; x++) {
        want[x] = EXPLAIN_P[x];
        worst = fmax(worst, fabs(exact[x] - want[x]));
    }
    ChiSquare cs = chi_square(counts, want, EXPLAIN_V, rounds);
    double rate = (double)n_acc / rounds, sig = sqrt(beta * (1.0 - beta) / rounds);
    int all_ok = case_check(worst < 1e-7 && fabs(beta - 0.45) < 1e-7,
                            "explain, A/B/C/D at t = 1: exact P(emit) == p within %.1g, "
                            "acceptance sum min(p, q) = %.6f (0.45)", worst, beta);
    all_ok &= case_check(cs.pvalue > 1e-4 && fabs(rate - beta) <= 4.5 * sig,
                         "explain, A/B/C/D at t = 1: %ld emitted tokens fit p (X2 = %.2f, df %d, "
                         "p-value %.3g); accepted %.4f vs %.4f (%.1f sd)", rounds, cs.stat,
                         cs.cells - 1, cs.pvalue, rate, beta, fabs(rate - beta) / sig);
    explain_position(NULL, "", EXPLAIN_Q, EXPLAIN_P, EXPLAIN_NAMES, EXPLAIN_V, 0.0f, rounds, 1,
                     exact, &beta, counts, &n_acc);
    all_ok &= case_check(counts[2] == rounds && n_acc == 0 && exact[2] == 1.0 && beta == 0.0,
                         "explain, greedy: the draft's argmax B is never accepted (%ld times), "
                         "the target's argmax C is emitted %ld of %ld times", n_acc, counts[2],
                         rounds);
    broken_verdict(all_ok, "explain's measured column does not fit p");
}

// ----------------------------------------------------------------------------
// 7. One round of one guess, enumerated over its forced uniforms on the model's real rows

// accept_reject's signature: the enumeration below runs it, or a planted bug's copy.
typedef int (*AcceptFn)(SpecBuffers *, int, int, Rng *);

// The smallest of rng_uniform's 2^53 values (index i: u = i / 2^53) at which one round of
// the one guess in b, its uniforms forced, passes `want`, by bisection. x = 0: u is the
// first uniform, and the output is whether the guess was rejected; x = 1: u is the resample's
// uniform after a first that rejects, and the output is the token drawn. Both rise with u.
static uint64_t first_above(AcceptFn accept, SpecBuffers *b, int x, int want) {
    uint64_t lo = 0, hi = (uint64_t)1 << 53; // hi = 2^53: the output never passes want
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        double u = (double)mid / 9007199254740992.0;
        double forced[2] = {x ? 0x1.fffffffffffffp-1 : u, u};
        Rng r;
        rng_seed(&r, 0); // a planted bug may draw more than the two forced values
        rng_force(&r, forced, 2);
        accept(b, 1, 0, &r);
        if ((x ? b->emitted[0] : b->rejected_at + 1) > want) hi = mid; // rejected: -1, or 0
        else lo = mid + 1;
    }
    return lo;
}

// Rounds a row to multiples of 2^-24, its largest entry taking the rest, so that it sums
// to exactly 1 in float and double alike: then the check below can ask for 1e-9.
static void round_row(float *row, int V) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        row[i] = (float)(round(row[i] * 16777216.0) / 16777216.0);
        sum += row[i];
    }
    row[argmax(row, V)] += (float)(1.0 - sum); // exact: every entry is a multiple of 2^-24
}

// Sampling is exact: the chance that one round of one guess emits each token, enumerated
// over every value its uniforms can take (first_above), equals the target's p, on the
// model's real rows: p after the corpus's first n tokens, q the bigram's row, both at t = 1.
// Returns the total variation between the two. (./specdec --selftest ran it until it moved here.)
static double selftest_sampling(GPT *g, const BigramDraft *d, const int *context, int n,
                         AcceptFn accept) {
    int V = g->config.vocab_size;
    float p[2 * 256], q[256]; // p_0, and a bonus row the round never reads
    double emit[256] = {0}, grid = 9007199254740992.0, u[1]; // emit[x]: the chance x comes out
    double residual[256]; // the round's residual: the weights a rejection draws from
    int guess[1], out[2]; // the round of one guess that first_above runs, in these buffers:
    SpecBuffers b = {.V = V, .candidates = guess, .draft_probs = q, .target_probs = p,
                     .u = u, .adjusted = residual, .emitted = out};
    g->state.cache_len = 0;
    tempered_softmax(p, forward(g, context, n) + (size_t)(n - 1) * V, V, 1.0f);
    tempered_bigram(q, d, context[n - 1], 1.0f);
    round_row(p, V);
    round_row(q, V);
    memcpy(p + V, p, (size_t)V * sizeof(float));
    for (int c = 0; c < V; c++) { // the guess c, drawn with chance q(c)
        guess[0] = c;
        double pass = first_above(accept, &b, 0, 0) / grid; // u1 below it: accepted
        emit[c] += q[c] * pass;
        double below = 0.0; // the resample's u2 interval for token x: [below, above)
        for (int x = 0; pass < 1.0 && x < V; x++) {
            double above = first_above(accept, &b, 1, x) / grid;
            emit[x] += q[c] * (1.0 - pass) * (above - below);
            below = above;
        }
    }
    double tv = 0.0; // total variation: half the summed gaps
    for (int x = 0; x < V; x++) tv += 0.5 * fabs(emit[x] - p[x]);
    return tv;
}

// selftest_sampling gets this build's accept_reject: in the correct build it must find the
// round exact (below 1e-9); in the builds that plant a bug in accept/reject (the residual
// drawn from p, the ratio swapped) it must not.
static void test_selftest_sampling(Fixture *fx) {
    if (!runs(CATCH_RESIDUAL | CATCH_RATIO)) return;
    int S = fx->model.config.block_size;
    double tv = selftest_sampling(&fx->model, &fx->draft.bigram, fx->corpus.tokens, S,
                                  accept_reject);
    int ok = case_check(tv < 1e-9, "one round of one guess, enumerated over its forced "
                        "uniforms, through this build's accept_reject: total variation %.2g "
                        "against p (below 1e-9)", tv);
    broken_verdict(ok, "the forced-uniform enumeration finds the planted bug");
}

// ----------------------------------------------------------------------------

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (BUG) printf("broken build -D%s: the tests that must catch it run, and must fail\n",
                    BUG_NAME);
    double t0 = now_seconds();
    test_enumeration();
    printf("(enumeration: %.1f s)\n", now_seconds() - t0);
    test_forced_edges();
    Fixture fx;
    memset(&fx, 0, sizeof(fx));
    char err[512] = "";
    if (load_checkpoint(MODEL_PATH, &fx.model, &fx.vocab, err, sizeof(err)) != 0 ||
        load_corpus(&fx.corpus, CORPUS_PATH, &fx.vocab, err, sizeof(err)) != 0) {
        check(0, "load %s and %s (run 'make data'): %s", MODEL_PATH, CORPUS_PATH, err);
        return 1;
    }
    Vocab cv; // the corpus's own vocabulary, sorted(set(text)): the trained model's must be it
    build_vocab(&cv, fx.corpus.bytes, fx.corpus.n);
    if (cv.size != fx.vocab.size || memcmp(cv.chars, fx.vocab.chars, (size_t)cv.size) != 0) {
        check(0, "the trained model %s has the corpus's vocabulary", MODEL_PATH);
        return 1;
    }
    // the three drafts, as ./beyond --draft builds them
    int S = fx.model.config.block_size;
    DraftInputs in = {.v = &fx.vocab, .corpus = &fx.corpus, .block_size = S};
    in.target = &fx.model;
    if (setup_draft("bigram", &in, &fx.draft, err, sizeof(err)) != 0 ||
        setup_draft("gpt", &in, &fx.gpt, err, sizeof(err)) != 0 ||
        setup_draft("lookup", &in, &fx.lookup, err, sizeof(err)) != 0 ||
        setup_draft("early-exit", &in, &fx.exit, err, sizeof(err)) != 0 ||
        setup_draft("eagle", &in, &fx.eagle, err, sizeof(err)) != 0 ||
        setup_draft("cascade", &in, &fx.cascade, err, sizeof(err)) != 0) {
        check(0, "build the bigram, gpt (%s), lookup, early-exit, eagle and cascade drafts: %s",
              DEFAULT_DRAFT, err);
        return 1;
    }
    t0 = now_seconds();
    test_chi_square(&fx);
    printf("(chi-square: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_copies_faithful(&fx);
    printf("(faithful copies: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_joint(&fx);
    printf("(end to end: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_edge_runs(&fx);
    test_self_draft(&fx);
    printf("(edge runs: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_cache_and_stats(&fx);
    printf("(cache and counters: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_explain();
    test_selftest_sampling(&fx);
    printf("(explain and self-test sampling: %.1f s)\n", now_seconds() - t0);
    free_gpt(&fx.model);
    free_draft(&fx.draft);
    free_draft(&fx.gpt);
    free_draft(&fx.lookup);
    free_draft(&fx.exit);
    free_draft(&fx.eagle);
    free_draft(&fx.cascade);
    free_corpus(&fx.corpus);
    printf("test_exact summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
