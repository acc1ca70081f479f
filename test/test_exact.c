/*
 * test/test_exact.c: speculative sampling is exact, shown six ways, and every way can
 * fail. "Exact" means: the text is distributed as the target SERVED it, tempered and cut
 * by top-k and top-p (Sampler), under plain decoding's context rule (the prefill runs the
 * prompt's last S tokens; a full cache restarts from the last S/2 tokens, current token
 * last), whichever draft proposed it and however --draft-p-min cut its drafting short.
 *
 *   1. Exact enumeration. For small hand-made draft/target pairs (V <= 5, K <= 3) the
 *      probability that one round of the real draft_tokens + accept_reject (through this
 *      build's mutants, section 3) emits each token sequence is computed exactly, with
 *      no sampling: every uniform draw is forced (rng_force, with one spare draw beyond
 *      the 2k+1 a round needs), and for each draw the test finds, by bisection over the
 *      2^53 values rng_uniform can return, the exact sub-intervals on which the code's
 *      decision stays the same. The test knows nothing of the algorithm: the code's own
 *      branches are measured. A round emits 1..k+1 tokens; completing its output with
 *      the target to k+1 tokens must give exactly the served target's probability for
 *      every sequence, to 1e-12 (the arithmetic is double; the rows are multiples of
 *      2^-20, so the float rows sum to exactly 1), and the first guess must be accepted
 *      with probability sum min(p, q). The drafts: a table with one row, a bigram table, a
 *      draft whose row depends on the whole prefix (k one-guess draft_tokens calls, each
 *      with its position's table: rows no bigram could give, as a model draft's are), and
 *      prompt lookup (the real draft_tokens over a text the case builds: three one-hot
 *      proposals, one, or none, which makes the round a plain step). The targets: one
 *      row, or a row that depends on the token before and the position. The cut: top-k 2,
 *      top-p 0.45, and both (top-k 2, top-p 0.6, with ties at the cut), applied by the
 *      real functions, the target's rows by apply_top_k_top_p and the draft's by
 *      draft_tokens (bigram_served_probs) with the same Sampler, and compared with the CUT
 *      target's probabilities; their rows are dyadic with a kept mass of 1/2, so the cut
 *      rows still sum to exactly 1 (checked). One case leaves the draft uncut against a
 *      cut target: exact too, since accept/reject is exact for any q. --draft-p-min: four
 *      table drafts with Draft.p_min set (0.2 on one row, 0.15 and 0.45 on bigram tables
 *      against the context-dependent target, 0.2 with top-k 2), so that some guesses fall
 *      below it (the draft stops after them) and some do not; each must show, at t = 1,
 *      drafts of K = 3 that stop early and drafts that go on past the first guess (the
 *      0.45 case stops its greedy drafts too). Each case runs with the draft at t = 1 and
 *      t = 0 (lookup at t = 1 only), K = 1..3, with and without the bonus: 22 cases, 40
 *      checks.
 *   2. Chi-square tests of the real code path. (a) On fixed p/q rows (draft_tokens, then
 *      accept_reject), 40,000 draws per case: hand-made rows, and the trained target's
 *      row after a prompt against the bigram row, served at t = 1, t = 0.7, top-k 5 and
 *      top-p 0.8. (b) End to end: test_generate (speculative_generate's loop, section 3)
 *      running ROUND on the trained model, K = 4, seeded runs of -n 5, the joint of the
 *      first two generated characters (the 1st is sampled from the prefill, the 2nd by
 *      the first round) and of the 2nd and 3rd (the first two the speculative rounds
 *      emit) against the exact joints of the served distribution from plain forward
 *      passes under plain decoding's context rule (plain_feed): after "ROMEO:\n", the
 *      bigram draft at t = 1.0 and 0.7 (30,000 runs each), the model draft
 *      (tinyshakespeare/draft.bin, its own KV cache) at t = 1, t = 1 top-k 3 and t = 1
 *      top-p 0.6 (6,000 runs each), prompt lookup at t = 1 on a prompt that repeats
 *      itself (6,000 runs); after a prompt of exactly S tokens (the corpus at 5000), which
 *      fills the cache, so that every first round is a folded one (it restarts the cache
 *      and its one verify pass reruns the S/2 - 1 tokens before current_token: the window
 *      plain decoding refills with, computed here by a refill on the target), the bigram
 *      draft (5,000 runs) and the model draft (3,000 runs) at t = 1; and with
 *      --draft-p-min after "ROMEO:\n", the bigram draft at 0.3 (6,000 runs) and the model
 *      draft at 0.3 (4,000 runs), each checked to stop some first rounds early and let
 *      some draft 2 or more. Cells expected below 5 are pooled into one cell; the test
 *      passes when the p-value is above 1e-4. Tokens of served probability 0 (cut away,
 *      or 0 in the target) must never come out.
 *   3. Power. Each "broken build" below plants one deliberate bug, from THIS file:
 *      specdec.c carries no test-only code. After specdec.c is included, the phases the
 *      test calls (draft_tokens, accept_reject, trim_kv_cache, restart_cache) are wrapped
 *      by mutant_draft_tokens, mutant_accept_reject, mutant_trim_kv_cache and
 *      mutant_restart_cache, which call the real functions and, in a broken build, add
 *      the bug; #defines route every call of this file through them. test/round_copy.h
 *      holds test_round (speculative_round's phases, routed the same way, with its
 *      bookkeeping: the restart, the room, the draft's lag, time and passes, b->drafted;
 *      then specdec.c's own count_pass, count_round and trace_round) and test_generate
 *      (speculative_generate's loop, with a round function and a hook after every round);
 *      every speculative run of this file is test_generate running ROUND: test_round in
 *      a broken build, speculative_round itself in the correct one. The correct build
 *      checks that test_generate running speculative_round, and test_generate running
 *      test_round, both bug-free, give speculative_generate's text, token sources
 *      (Output.source), Stats (but wall times) and final cache lengths bit for bit, with
 *      each draft (bigram, gpt, lookup) and each way of serving (t = 1, 0.7, 0, t = 1
 *      top-k 5 top-p 0.9, and t = 1 with --draft-p-min 0.4 for bigram and gpt), over
 *      8S+20 tokens, which restart the cache many times (required: PASS_FOLDED > 0): 14
 *      checks, so the mutants live in a faithful copy of the loop and the round.
 *      test/run_tests.sh builds this file once per flag, and in that build the tests
 *      that should see the bug must FAIL (each prints PASS "expected failure ...").
 *   4. Edge cases: forced u = 0 and u just below 1, a residual with no mass; greedy runs
 *      that must equal plain decoding's text token for token (generate): K larger than
 *      the tokens still needed, K = 1, K = block_size - 1 (every round cut to the cache's
 *      room), each draft (and the bigram and model drafts with --draft-p-min 0.3 and
 *      0.7), a prompt that fills the context (round 1 folded) with each draft, a draft
 *      that never agrees (every round emits exactly one token); every greedy run but
 *      the first restarts the cache (PASS_FOLDED > 0 required). The target as its own
 *      draft: every draft accepted, with a top-k/top-p cut too.
 *   5. After every round of long runs (test_generate's hook): the round's k+1 served
 *      rows (p_target) equal, bit for bit, plain decoding's rows from a fresh model fed
 *      current_token and then each guess one by one under the context rule on top of
 *      the context the rule gives the round (the S/2 - 1 tokens before current_token
 *      when the cache was full: the folded rounds; the cached tokens otherwise); the
 *      target's KV cache has the length the rule gives (fed every token the round
 *      emitted but the last) and equals, bit for bit, a fresh prefill over those tokens;
 *      a model draft's cache equals a fresh prefill of the draft over the first of them
 *      (it may lag by a bonus's last guess, a k = 0 round or a restart's window, never
 *      run ahead). The folded rounds and the k = 0 rounds at the cache's last slot are
 *      counted (both must occur). The counters add up (empty lookup rounds, k = 0 steps,
 *      the model draft's passes, the guesses asked for: min(K, tokens still needed,
 *      S - 1 - context)); Stats.pass and Stats.size, passes and tokens, equal the test's
 *      own tally by the rule (the prefill; a folded pass of S/2 + k tokens after a
 *      restart, else a verify pass of 1 + k, or a one-token step when k = 0; no refill);
 *      Stats.judged and Stats.alpha_sum equal the test's own count and sum over the
 *      judged positions of sum_x min(p(x), q(x)), and the accepted count is within 4.5
 *      sigma of that sum. The bigram draft at t = 1, 0.7 and 0 (2,000 tokens each), the
 *      model draft at t = 1, t = 1 top-k 5 top-p 0.9 and t = 1 with --draft-p-min 0.7,
 *      and lookup at t = 1 (1,000 tokens each).
 *   6. test/explain's numbers (explain_position, from test/explain.c, included here):
 *      the exact column is p, the measured column fits it (correct build only: explain
 *      calls the real phases, not this file's mutants; section 2's A/B/C/D case is the
 *      same measurement through the mutants).
 *   7. --selftest's sampling check (specdec.c's selftest_sampling: one round of one guess,
 *      enumerated over every forced draw on the trained model's real rows) run through
 *      this build's accept_reject: below 1e-9 of p in the correct build, and above it in
 *      BREAK_RESIDUAL's and BREAK_RATIO's, so the self-test's own check can fail.
 *
 * broken build: -DBREAK_RESIDUAL
 * broken build: -DBREAK_RATIO
 * broken build: -DBREAK_DRAFT_Q
 * broken build: -DBREAK_TRIM
 * broken build: -DBREAK_FILTER_DRAFT
 * broken build: -DBREAK_UNFILTERED_Q
 * broken build: -DBREAK_FOLD
 * broken build: -DBREAK_P_MIN
 *   BREAK_RESIDUAL      after a rejection the resampled token is drawn again, from p with a
 *                       fresh uniform, instead of from norm(max(0, p - q));
 *   BREAK_RATIO         accept_reject gets the p and q rows swapped, so a candidate is
 *                       accepted with min(1, q/p) instead of min(1, p/q) (and the residual
 *                       is max(0, q - p));
 *   BREAK_DRAFT_Q       the bigram draft samples from its served row (tempered, cut), then
 *                       each q_draft row is overwritten with the raw table row
 *                       (bigram_get_probs): caught at t != 1 or with a cut;
 *   BREAK_TRIM          trim_kv_cache does nothing: rejected candidates stay in the
 *                       target's cache and the model draft's;
 *   BREAK_FILTER_DRAFT  the draft is cut differently from the target: its guesses are
 *                       drawn from its row cut at top_k + 1 and not by top-p, while the q
 *                       rows handed to accept_reject are cut as the target's, so a guess
 *                       the target's cut removed has q = 0 there (and passes: p/0);
 *   BREAK_UNFILTERED_Q  the guesses are drawn from the draft's served (cut) rows, but the
 *                       q rows handed to accept_reject are the uncut ones;
 *   BREAK_FOLD          the round that finds the cache full folds at the wrong position:
 *                       restart_cache returns S/2 instead of S/2 - 1, so the verify pass
 *                       reruns S/2 tokens before current_token, a window of S/2 + 1 with
 *                       current_token at position S/2, where plain decoding's refill keeps
 *                       S/2 tokens, current_token last at position S/2 - 1 ("the last S/2
 *                       tokens" read as the tokens before current_token). Caught by the
 *                       greedy runs of section 4, section 5's rows and cache length, and
 *                       section 2b's cases whose first round is folded;
 *   BREAK_P_MIN         --draft-p-min drops the unsure guess: a guess below p_min ends the
 *                       drafting WITHOUT being proposed (the real draft proposes it, then
 *                       stops), and the guesses kept are judged with their whole q row. A
 *                       kept guess was drawn from q but kept only when the draft was sure
 *                       of it, so its law is q restricted to the sure tokens H, not the q
 *                       in the ratio. For the first guess, with U = the unsure tokens, the
 *                       round emits x with chance q(U) p(x) (the guess dropped: a plain
 *                       step) + [x in H] min(p, q)(x) (kept and accepted) + (q(H) - sum over
 *                       H of min(p, q)) r(x) (kept and rejected, r the residual), which is
 *                       not p(x) wherever the row holds both kinds (where all its tokens
 *                       are unsure the round is a plain step, exact). Caught by section 1's
 *                       p_min cases (their first guess is accepted with sum over H of
 *                       min(p, q), not sum min(p, q)) and section 2b's p_min cases.
 *   A draft cut differently but CONSISTENTLY (the row drawn from is the row judged) is not
 *   a bug: accept/reject is exact for any q (section 1's uncut draft shows it), so the
 *   two cut bugs plant the mismatch between the row a guess was drawn from and the row
 *   in the ratio. Both change nothing while top-k and top-p are off. Likewise a stopping
 *   rule that reads only the draft is exact (the guess that ends the drafting is still
 *   drawn from q and judged with q): BREAK_P_MIN breaks it by conditioning what is kept.
 *
 * Run from the repository root with tinyshakespeare/input.txt, model.bin and draft.bin
 * present. Sanitizer builds run the model-heavy parts with fewer runs: 500 instead of
 * 30,000, 100 instead of 6,000 (the model draft and lookup after "ROMEO:\n"), 40 and 30
 * instead of 5,000 and 3,000 (a prompt of S tokens), 100 and 50 instead of 6,000 and
 * 4,000 (--draft-p-min) end-to-end runs; 120 or 100 instead of 2,000 and 50 instead of
 * 1,000 tokens per cache run; 2S+20 instead of 8S+20 tokens per copy comparison (and not
 * at t = 0.7); 100 instead of 300 greedy tokens per draft, 50 instead of 100 after a
 * prompt of S tokens (the checks are the same).
 */
#define TESTING
#include "explain.c" // explain_position (section 6); it includes ../specdec.c

#include "check.h"

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

// The cut-dependent bugs: they change nothing while top-k and top-p are off.
#define CATCH_CUT (CATCH_FILTER_DRAFT | CATCH_UNFILTERED_Q)

// ----------------------------------------------------------------------------
// The mutants: the phases this file calls, with this build's bug planted (none in the
// correct build). Each calls specdec.c's real function, then breaks its result.

// Scratch rows for BREAK_RATIO's swapped p and q (grown as needed, freed by main).
static float *swap_p, *swap_q;
static size_t swap_cap;

// The draft's rows for the k guesses draft_tokens just proposed, tempered as s says but
// not cut by top-k or top-p: what BREAK_UNFILTERED_Q hands to accept_reject. A bigram row
// is bigram_served_probs without the cut. A model draft's k passes wrote positions cache_len ..
// cache_len+k-1 of its cache; one pass over the same tokens [current, c0 .. c(k-2)] from
// cache_len gives the same logits (a pass of k tokens equals k passes of one, bit for
// bit) and leaves its cache as it was. Lookup's one-hot rows have nothing to cut.
static void unfiltered_rows(Draft *d, const int *seq, int n_seq, int cache_len, int k,
                            const Sampler *s, const int *candidates, float *q_draft) {
    Sampler uncut = {s->temperature, 0, 0.0f};
    int V = d->V;
    if (d->kind == DRAFT_BIGRAM) {
        for (int i = 0; i < k; i++) {
            int before = i == 0 ? seq[n_seq - 1] : candidates[i - 1];
            bigram_served_probs(q_draft + (size_t)i * V, &d->bigram, before, &uncut);
        }
    }
    if (d->kind != DRAFT_GPT || k == 0) return;
    int *toks = malloc((size_t)k * sizeof(int));
    if (!toks) {
        fprintf(stderr, "test_exact: out of memory for BREAK_UNFILTERED_Q's rows\n");
        exit(1);
    }
    toks[0] = seq[n_seq - 1];
    memcpy(toks + 1, candidates, (size_t)(k - 1) * sizeof(int));
    d->model.state.kv_len = cache_len;
    const float *logits = forward(&d->model, toks, k, NULL);
    for (int i = 0; i < k; i++)
        tempered_softmax(q_draft + (size_t)i * V, logits + (size_t)i * V, V, s->temperature);
    free(toks);
}

// Whether the last of the k >= 1 guesses draft_tokens just made is one the draft gives
// less than d->p_min (the chance --draft-p-min reads, at t = 1 before any cut): a bigram
// table's entry, or the softmax of the model draft's last pass (row lag of its first pass,
// which ran the lag tokens it caught up on, else row 0). draft_kv: the model draft's
// kv_len before drafting.
static int last_guess_unsure(Draft *d, const int *seq, int n_seq, int cache_len, int draft_kv,
                             int k, const int *candidates) {
    int V = d->V, guess = candidates[k - 1];
    if (d->kind == DRAFT_BIGRAM)
        return bigram_get_probs(&d->bigram, k == 1 ? seq[n_seq - 1] : candidates[k - 2])[guess] <
               d->p_min;
    if (d->kind != DRAFT_GPT) return 0; // lookup's copies: p_min does not apply
    int row = k == 1 ? cache_len - draft_kv : 0;
    float own[256]; // softmax at t = 1, as gpt_draft_tokens reads it
    tempered_softmax(own, d->model.state.logits + (size_t)row * V, V, 1.0f);
    return own[guess] < d->p_min;
}

// draft_tokens; BREAK_DRAFT_Q: the candidates stay drawn from the served rows, but each
// q_draft row of a bigram draft becomes the raw table row of the token before it
// (untempered, uncut). BREAK_FILTER_DRAFT: the guesses are drawn from the draft's row
// cut more loosely than the target's (top_k + 1, no top-p), but the rows handed on are
// that row cut as the target's (apply_top_k_top_p with s): the row in the ratio is not
// the row the guess was drawn from. BREAK_UNFILTERED_Q: the guesses are drawn from the
// served (cut) rows, but the rows handed on are the uncut ones (unfiltered_rows).
// BREAK_P_MIN: a guess below d->p_min ends the drafting WITHOUT being proposed (the real
// draft stops after it), while the guesses kept are still judged with the whole q row:
// a kept guess was drawn from q and kept only when the draft was sure of it, so its law
// is q restricted to the sure tokens, not q (and a first guess can be dropped too, which
// makes the round a plain step).
static int mutant_draft_tokens(Draft *d, const Tokens *text, int k, const Sampler *s, Rng *rng,
                               SpecBuffers *b) {
    const int *seq = text->tok;
    int n_seq = text->n, cache_len = b->cache_len, *candidates = b->candidates;
    float *q_draft = b->q_draft;
    Sampler drawn = *s; // the cut the guesses are drawn with
    if (BUG == CATCH_FILTER_DRAFT) {
        drawn.top_k = s->top_k > 0 ? s->top_k + 1 : 0;
        drawn.top_p = 0.0f;
    }
    int draft_kv = d->kind == DRAFT_GPT ? d->model.state.kv_len : 0;
    k = draft_tokens(d, text, k, &drawn, rng, b);
    if (BUG == CATCH_P_MIN && k > 0 && d->p_min > 0.0f &&
        last_guess_unsure(d, seq, n_seq, cache_len, draft_kv, k, candidates))
        k--; // drawn, found unsure, and dropped
    int V = d->V;
    if (BUG == CATCH_FILTER_DRAFT)
        for (int i = 0; i < k; i++) apply_top_k_top_p(q_draft + (size_t)i * V, V, s);
    if (BUG == CATCH_UNFILTERED_Q)
        unfiltered_rows(d, seq, n_seq, cache_len, k, s, candidates, q_draft);
    if (BUG == CATCH_DRAFT_Q && d->kind == DRAFT_BIGRAM)
        for (int i = 0; i < k; i++)
            memcpy(q_draft + (size_t)i * V,
                   bigram_get_probs(&d->bigram, i == 0 ? seq[n_seq - 1] : candidates[i - 1]),
                   (size_t)V * sizeof(float));
    return k;
}

// accept_reject; BREAK_RATIO: the real one run with the p and q rows swapped (rows
// 0..k-1; the bonus row k stays p_k), so it accepts with min(1, q/p) and resamples
// from max(0, q - p). BREAK_RESIDUAL: after a rejection, the resampled token is drawn
// again from the p row, with a fresh uniform.
static int mutant_accept_reject(SpecBuffers *b, int k, int allow_bonus, Rng *rng) {
    int V = b->V;
    float *q_draft = b->q_draft, *p_target = b->p_target; // the round's own rows
    if (BUG == CATCH_RATIO) {
        size_t need = (size_t)(k + 1) * V;
        if (need > swap_cap) {
            free(swap_p);
            free(swap_q);
            swap_p = malloc(need * sizeof(float));
            swap_q = malloc(need * sizeof(float));
            swap_cap = need;
            if (!swap_p || !swap_q) {
                fprintf(stderr, "test_exact: out of memory for BREAK_RATIO's rows\n");
                exit(1);
            }
        }
        memcpy(swap_p, q_draft, (size_t)k * V * sizeof(float));               // "p" = q
        memcpy(swap_p + (size_t)k * V, p_target + (size_t)k * V, V * sizeof(float)); // bonus
        memcpy(swap_q, p_target, (size_t)k * V * sizeof(float));              // "q" = p
        b->q_draft = swap_q; // for this call only: the round keeps its own rows
        b->p_target = swap_p;
    }
    int n = accept_reject(b, k, allow_bonus, rng);
    b->q_draft = q_draft;
    b->p_target = p_target;
    if (BUG == CATCH_RESIDUAL && b->rejected_at >= 0)
        b->accepted[b->rejected_at] =
            sample_from(p_target + (size_t)b->rejected_at * V, V, rng_uniform(rng));
    return n;
}

// trim_kv_cache; BREAK_TRIM: does nothing, the rejected candidates stay in the target's
// cache and the model draft's.
static void mutant_trim_kv_cache(GPT *g, GPT *draft, int num_accepted, int cache_len_before) {
    if (BUG != CATCH_TRIM) trim_kv_cache(g, draft, num_accepted, cache_len_before);
}

// restart_cache; BREAK_FOLD: the round that finds the cache full restarts it one token
// too long: it returns S/2 instead of S/2 - 1, so the folded verify pass reruns S/2
// tokens before current_token (a window of S/2 + 1, current_token at position S/2),
// where plain decoding's refill keeps the last S/2 tokens, current_token last, at
// position S/2 - 1: "the last S/2 tokens" read as the tokens before current_token.
static int mutant_restart_cache(GPT *g, Draft *d) {
    int lag = restart_cache(g, d);
    return BUG == CATCH_FOLD ? lag + 1 : lag;
}

// From here on, every call of this file goes through the mutants.
#define draft_tokens mutant_draft_tokens
#define accept_reject mutant_accept_reject
#define trim_kv_cache mutant_trim_kv_cache
#define restart_cache mutant_restart_cache

// test_round (this file's mutants, routed above), ROUND, runs, case_check, broken_verdict
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
// Statistics helpers

// Upper regularised incomplete gamma Q(a, x) = Gamma(a, x) / Gamma(a): a series for
// x < a + 1, a continued fraction (modified Lentz) beyond. The chi-square p-value of
// X with d degrees of freedom is Q(d/2, X/2).
static double gamma_q(double a, double x) {
    if (x <= 0.0) return 1.0;
    double lg = lgamma(a);
    if (x < a + 1.0) {
        double term = 1.0 / a, sum = term;
        for (int n = 1; n < 1000 && term > sum * 1e-16; n++) sum += term *= x / (a + n);
        return 1.0 - sum * exp(-x + a * log(x) - lg);
    }
    double b = x + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
    for (int i = 1; i < 1000; i++) {
        double an = -i * (i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < 1e-300) d = 1e-300;
        c = b + an / c;
        if (fabs(c) < 1e-300) c = 1e-300;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1.0) < 1e-15) break;
    }
    return exp(-x + a * log(x) - lg) * h;
}

typedef struct {
    double stat, pvalue;
    int cells, pooled;   // cells in the test (the pooled one included), cells pooled
    long zero_hits;      // draws of a cell whose expected probability is exactly 0
} ChiSquare;

// Pearson's chi-square of counts against probabilities want (n cells, total draws):
// cells expected below 5 are merged into one; a cell of probability 0 that was drawn
// counts in zero_hits (and makes the test fail on its own).
static ChiSquare chi_square(const long *counts, const double *want, int n, long total) {
    ChiSquare r = {0.0, 1.0, 0, 0, 0};
    double pool_e = 0.0;
    long pool_o = 0;
    for (int i = 0; i < n; i++) {
        double e = want[i] * (double)total;
        if (want[i] == 0.0) r.zero_hits += counts[i];
        if (e < 5.0) {
            pool_e += e;
            pool_o += counts[i];
            r.pooled++;
            continue;
        }
        r.stat += (counts[i] - e) * (counts[i] - e) / e;
        r.cells++;
    }
    if (pool_e > 0.0) {
        r.stat += (pool_o - pool_e) * (pool_o - pool_e) / pool_e;
        r.cells++;
    }
    r.pvalue = r.cells > 1 ? gamma_q((r.cells - 1) / 2.0, r.stat / 2.0) : 1.0;
    return r;
}

// ----------------------------------------------------------------------------
// 1. Exact enumeration of one round

enum { EV = 5, EK = 3, ETEXT = 12 }; // largest vocabulary, draft length, lookup text

// How a case's draft proposes. The target's rows are set by the case's ctx_dep.
typedef enum {
    Q_ONE_ROW, // a bigram table whose every row is q[0]
    Q_BIGRAM,  // a bigram table: row q[last] after token last
    Q_PREFIX,  // guess i after the prefix current, c0 .. c(i-1): row q[(sum of the prefix's
               // tokens + i) % V]. It depends on the whole prefix, as a model draft's row
               // does, so no bigram table can give it
    Q_LOOKUP   // prompt lookup over the case's text: one-hot rows, no uniform drawn
} DraftShape;

// A hand-made draft and target. The target's row for position i of a round depends on
// the token before it: row p[0] for every context (ctx_dep = 0), or row p[(last + i) % V]
// (ctx_dep = 1), which no bigram table can equal. top_k and top_p are the served cut:
// the target's rows are cut by apply_top_k_top_p, the draft's by draft_tokens (through
// bigram_served_probs) with the same Sampler, unless draft_uncut says the draft is not cut.
typedef struct {
    const char *name;
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
    int k;          // guesses the draft proposed (lookup may propose fewer than asked)
    int cand[EK], rejected_at, n, out[EK + 1];
} Outcome;

// Uniforms forced in a round of k drafts: k draft, up to k accept, one resample or bonus,
// and one spare, so a round that draws once more (BREAK_RESIDUAL does) is measured
// like any other instead of running past the forced list. The correct round never
// uses the spare: its branches end before it.
#define FORCED(k) (2 * (k) + 2)

typedef struct {
    const EnumCase *c;
    Draft d;                  // the case's draft, as the real type: a table or lookup
    float table[EV * EV];     // the table's rows (Q_PREFIX rewrites them per guess)
    SpecBuffers b;
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

// Phase 1 for the case's draft, through this build's draft_tokens: a table in one call,
// lookup over the case's text, or the prefix draft as k one-guess calls, each with the
// table of its position (row a: the draft's row after the prefix that ends in a).
static int draft_case(Enum *e, Rng *r) {
    const EnumCase *c = e->c;
    int V = c->V;
    Sampler s = case_sampler(c, e->t, 1);
    if (c->shape == Q_LOOKUP)
        return draft_tokens(&e->d, &(Tokens){c->text, c->n_text}, e->k, &s, r, &e->b);
    if (c->shape != Q_PREFIX)
        return draft_tokens(&e->d, &(Tokens){&e->current, 1}, e->k, &s, r, &e->b);
    int sum = 0, last = e->current; // sum: the prefix's tokens before last
    for (int i = 0; i < e->k; i++) {
        for (int a = 0; a < V; a++)
            memcpy(e->table + a * V, c->q[(sum + a + i) % V], V * sizeof(float));
        SpecBuffers at = e->b; // the buffers from guess i on: the one-guess call writes row 0
        at.candidates += i;
        at.q_draft += (size_t)i * V;
        draft_tokens(&e->d, &(Tokens){&last, 1}, 1, &s, r, &at);
        sum += last;
        last = e->b.candidates[i];
    }
    return e->k;
}

// Runs the draft, the target rows a verify pass would give, and accept_reject, with the
// bonus allowed as speculative_round allows it: when fewer were proposed than are wanted.
static void run_round(Enum *e, Outcome *o) {
    int V = e->c->V, m = FORCED(e->k);
    Rng r;
    rng_seed(&r, 1);
    uint64_t state = r.state;
    rng_force(&r, e->u, m);
    int k = draft_case(e, &r);
    for (int i = 0; i <= k; i++) {
        int last = i == 0 ? e->current : e->b.candidates[i - 1];
        memcpy(e->b.p_target + (size_t)i * V, served_row(e->c, last, i), V * sizeof(float));
    }
    memset(o, 0, sizeof(*o));
    o->k = k;
    o->n = accept_reject(&e->b, k, k < e->remaining, &r);
    o->consumed = m - r.n_forced;
    o->overrun = r.state != state;
    o->rejected_at = e->b.rejected_at;
    memcpy(o->cand, e->b.candidates, (size_t)k * sizeof(int));
    memcpy(o->out, e->b.accepted, (size_t)o->n * sizeof(int));
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
// (p_served) and the draft's (through bigram_served_probs at t = 1, as the round makes them). A
// row that sums to 1 +- 2^-24 would make the round's output differ from p by that much:
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
        // the table of the seed paper's section 3.1 (A, B, C, D)
        {.name = "the A/B/C/D table (q .1/.6/.2/.1, p .05/.1/.6/.25)", .V = 4,
         .q_raw = {{0.10, 0.60, 0.20, 0.10}}, .p_raw = {{0.05, 0.10, 0.60, 0.25}}},
        {.name = "p == q", .V = 5, .q_raw = {{0.3, 0.1, 0.25, 0.15, 0.2}},
         .p_raw = {{0.3, 0.1, 0.25, 0.15, 0.2}}},
        {.name = "disjoint supports", .V = 5, .q_raw = {{0.5, 0.5, 0, 0, 0}},
         .p_raw = {{0, 0, 0.2, 0.3, 0.5}}},
        {.name = "one-hot p", .V = 5, .q_raw = {{0.2, 0.2, 0.2, 0.2, 0.2}},
         .p_raw = {{0, 0, 1, 0, 0}}},
        {.name = "one-hot q", .V = 5, .q_raw = {{0, 1, 0, 0, 0}},
         .p_raw = {{0.1, 0.3, 0.2, 0.2, 0.2}}},
        {.name = "q zero where p is not", .V = 5, .q_raw = {{0.4, 0.4, 0.2, 0, 0}},
         .p_raw = {{0.1, 0.2, 0.3, 0.2, 0.2}}},
        {.name = "context-dependent target, bigram draft", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .q_raw = CTX_Q, .p_raw = CTX_P},
        // a draft whose row depends on the whole prefix, as a model draft's does
        {.name = "context-dependent target, prefix-dependent draft", .V = 5, .ctx_dep = 1,
         .shape = Q_PREFIX, .q_raw = CTX_Q, .p_raw = CTX_P},
        // prompt lookup: one-hot rows copied from the text, no uniform drawn for them
        {.name = "prompt lookup over 1 2 3 4 0 2 1 2 (proposes 3 4 0), context-dependent "
                 "target", .V = 5, .ctx_dep = 1, .shape = Q_LOOKUP,
         .text = {1, 2, 3, 4, 0, 2, 1, 2}, .n_text = 8, .first_guess = 3, .p_raw = CTX_P},
        {.name = "prompt lookup over 0 4 4 4 (proposes one token, whatever K)", .V = 5,
         .ctx_dep = 1, .shape = Q_LOOKUP, .text = {0, 4, 4, 4}, .n_text = 4,
         .first_guess = 4, .p_raw = CTX_P},
        {.name = "prompt lookup over 0 1 2 3 (no match: a plain step)", .V = 5, .ctx_dep = 1,
         .shape = Q_LOOKUP, .text = {0, 1, 2, 3}, .n_text = 4, .first_guess = -1,
         .p_raw = CTX_P},
        // the served cut on both sides, compared with the cut target
        {.name = "top-k 2, one row each (kept sets {2,0} and {0,3})", .V = 5, .top_k = 2,
         .q_raw = {{A_, D_, C_, B_, C_}}, .p_raw = {{B_, C_, A_, D_, C_}}},
        {.name = "top-p 0.45, one row each (kept sets {1,3} and {2,1})", .V = 5,
         .top_p = 0.45f, .q_raw = {{C_, B_, A_, C_, D_}}, .p_raw = {{C_, A_, D_, B_, C_}}},
        {.name = "top-k 2 and top-p 0.6, ties at the cut", .V = 5, .top_k = 2, .top_p = 0.6f,
         .q_raw = {{E_, E_, F_, E_, F_}}, .p_raw = {{E_, F_, E_, E_, F_}}},
        {.name = "top-k 2, context-dependent target, prefix-dependent draft", .V = 5,
         .ctx_dep = 1, .shape = Q_PREFIX, .top_k = 2, .q_raw = CUT_Q, .p_raw = CUT_P},
        {.name = "top-p 0.45, context-dependent target, prefix-dependent draft", .V = 5,
         .ctx_dep = 1, .shape = Q_PREFIX, .top_p = 0.45f, .q_raw = CUT_Q, .p_raw = CUT_P},
        {.name = "top-k 2, prompt lookup over 1 2 3 4 0 2 1 2", .V = 5, .ctx_dep = 1,
         .shape = Q_LOOKUP, .top_k = 2, .text = {1, 2, 3, 4, 0, 2, 1, 2}, .n_text = 8,
         .first_guess = 3, .p_raw = CUT_P},
        // any q is exact: a draft left uncut, drawn from and judged by the same rows
        {.name = "top-k 2 target, uncut bigram draft", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .top_k = 2, .draft_uncut = 1, .q_raw = CUT_Q, .p_raw = CUT_P},
        // --draft-p-min: a guess whose raw table entry is below p_min is the draft's last
        // (proposed and judged all the same); the draft reads only its own table
        {.name = "p_min 0.2, one row each (guesses 0, 1 go on; 2, 3, 4 end the draft)",
         .V = 5, .p_min = 0.2f, .q_raw = {{0.4, 0.3, 0.15, 0.1, 0.05}},
         .p_raw = {{0.1, 0.2, 0.3, 0.25, 0.15}}},
        {.name = "p_min 0.15, context-dependent target, bigram draft", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .p_min = 0.15f, .q_raw = CTX_Q, .p_raw = CTX_P},
        {.name = "p_min 0.45, context-dependent target, bigram draft (greedy from 0: guess 1 "
                 "at .6 goes on, guess 2 at .4 ends the draft)", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .p_min = 0.45f, .p_raw = CTX_P,
         .q_raw = {{0.1, 0.6, 0.1, 0.1, 0.1}, {0.1, 0.1, 0.4, 0.2, 0.2},
                   {0.5, 0.2, 0.1, 0.1, 0.1}, {0.2, 0.2, 0.2, 0.2, 0.2},
                   {0.3, 0.3, 0.0, 0.2, 0.2}}},
        {.name = "p_min 0.2, top-k 2, context-dependent target, bigram draft (kept guesses "
                 "of .3125 and .25 go on, of .1875 end the draft)", .V = 5, .ctx_dep = 1,
         .shape = Q_BIGRAM, .top_k = 2, .p_min = 0.2f, .q_raw = CUT_Q, .p_raw = CUT_P},
    };
    int n_cases = (int)(sizeof(cases) / sizeof(cases[0])), all_ok = 1;
    for (int ci = 0; ci < n_cases; ci++) {
        EnumCase *c = &cases[ci];
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
        Draft table_draft = {.kind = DRAFT_BIGRAM, .name = "table", .V = c->V,
                             .bigram = {c->V, e->table}, .p_min = c->p_min};
        Draft lookup = {.kind = DRAFT_LOOKUP, .name = "lookup", .V = c->V};
        e->d = c->shape == Q_LOOKUP ? lookup : table_draft;
        build_spec_buffers(&e->b, EK, c->V, EK + 1);
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
        free(e);
    }
    broken_verdict(all_ok, "the exact enumeration differs from the served target");
}

// ----------------------------------------------------------------------------
// Fixture: the corpus, the three drafts, and the trained model

typedef struct {
    Corpus corpus;
    Vocab vocab;
    Draft draft;  // the blog's bigram table
    Draft gpt;    // the model draft, tinyshakespeare/draft.bin
    Draft lookup; // prompt lookup
    GPT model;
} Fixture;

static int encode_str(const Vocab *v, const char *s, int *out) {
    long n = (long)strlen(s);
    if (encode(v, (const unsigned char *)s, (size_t)n, out) >= 0) return -1;
    return (int)n;
}

// ----------------------------------------------------------------------------
// 2a. Chi-square of draft_tokens + accept_reject on fixed rows

// Draws n tokens: a candidate from the draft's row after `current` (served as s says),
// then accept_reject with k = 1 and no bonus; counts[x] = how often x was emitted.
static void draw_first_tokens(Draft *d, int current, const float *p, const Sampler *s, long n,
                              uint64_t seed, long *counts, long *accepted) {
    int V = d->V;
    SpecBuffers b;
    build_spec_buffers(&b, 1, V, 2);
    memcpy(b.p_target, p, (size_t)V * sizeof(float));
    Rng r;
    rng_seed(&r, seed);
    *accepted = 0;
    for (long i = 0; i < n; i++) {
        draft_tokens(d, &(Tokens){&current, 1}, 1, s, &r, &b);
        int m = accept_reject(&b, 1, 0, &r);
        counts[b.accepted[0]] += m == 1;
        *accepted += b.rejected_at < 0;
    }
    free_spec_buffers(&b);
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
    // t = 1 and no cut: no tempering or cutting to get wrong
    for (int h = 0; h < 3 && runs(CATCH_RESIDUAL | CATCH_RATIO); h++) {
        int V = hand[h].V;
        float table[25];
        for (int a = 0; a < V; a++) memcpy(table + a * V, hand[h].q, V * sizeof(float));
        Draft d = {.kind = DRAFT_BIGRAM, .name = "table", .V = V, .bigram = {V, table}};
        Sampler s = {1.0f, 0, 0.0f};
        long counts[5] = {0}, acc;
        double want[5], z = 0.0, smin = 0.0;
        for (int x = 0; x < V; x++) z += hand[h].p[x];
        for (int x = 0; x < V; x++) {
            want[x] = hand[h].p[x] / z;
            smin += fmin(hand[h].p[x], hand[h].q[x]);
        }
        draw_first_tokens(&d, 0, hand[h].p, &s, DRAWS, 100 + h, counts, &acc);
        ChiSquare cs = chi_square(counts, want, V, DRAWS);
        double rate = (double)acc / DRAWS, sig = sqrt(smin * (1 - smin) / DRAWS);
        int ok = cs.pvalue > 1e-4 && cs.zero_hits == 0 && fabs(rate - smin) <= 4.5 * sig + 1e-12;
        all_ok &= case_check(ok, "chi-square, %s, %d draws: X2 = %.2f on %d df, p-value %.3g; "
                             "%ld draws of p = 0 tokens; acceptance %.4f vs sum min(p,q) %.4f",
                             hand[h].name, DRAWS, cs.stat, cs.cells - 1, cs.pvalue,
                             cs.zero_hits, rate, smin);
    }
    // real rows: the trained target after a prompt, the Tiny Shakespeare bigram draft, both
    // served alike (tempered, then cut)
    GPT *g = &fx->model;
    int V = g->config.vocab_size, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\nWhat say", prompt);
    struct { Sampler s; int catches; } served[] = {
        {{1.0f, 0, 0.0f}, CATCH_RESIDUAL | CATCH_RATIO},
        {{0.7f, 0, 0.0f}, CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q},
        {{1.0f, 5, 0.0f}, CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q | CATCH_CUT},
        {{1.0f, 0, 0.8f}, CATCH_RESIDUAL | CATCH_RATIO | CATCH_DRAFT_Q | CATCH_CUT},
    };
    float *p = malloc((size_t)V * sizeof(float)), *q = malloc((size_t)V * sizeof(float));
    long *counts = malloc((size_t)V * sizeof(long));
    double *want = malloc((size_t)V * sizeof(double));
    for (int si = 0; si < 4; si++) {
        const Sampler *s = &served[si].s;
        if (!runs(served[si].catches)) continue;
        g->state.kv_len = 0;
        const float *lg = forward(g, prompt, np, NULL);
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
        draw_first_tokens(&fx->draft, prompt[np - 1], p, s, DRAWS, 200 + si, counts, &acc);
        ChiSquare cs = chi_square(counts, want, V, DRAWS);
        double rate = (double)acc / DRAWS, sig = sqrt(smin * (1 - smin) / DRAWS);
        int ok = cs.pvalue > 1e-4 && cs.zero_hits == 0 && fabs(rate - smin) <= 4.5 * sig;
        char name[64];
        sampler_name(name, sizeof(name), s);
        all_ok &= case_check(ok, "chi-square, trained target after \"ROMEO:\\nWhat say\" vs the "
                             "bigram row of 'y', both served %s (the target keeps %d tokens), %d "
                             "draws: X2 = %.2f on %d df (%d cells pooled), p-value %.3g, %ld "
                             "draws of p = 0 tokens; acceptance %.4f vs sum min(p,q) %.4f (%.1f "
                             "sigma)", name, kept, DRAWS, cs.stat,
                             cs.cells - 1, cs.pooled, cs.pvalue, cs.zero_hits, rate, smin,
                             fabs(rate - smin) / sig);
    }
    free(p); free(q); free(counts); free(want);
    broken_verdict(all_ok, "the emitted tokens are not distributed as the served p");
}

// ----------------------------------------------------------------------------
// 2b. End to end: the joint of two characters from speculative_generate's loop

// Plain decoding's context rule, restated for one more token: the cache holds the tokens
// before seq[n-1], which is fed now; when the cache is full it is emptied and the last S/2
// tokens, seq[n-1] last, run again from position 0 (a refill), else seq[n-1] runs on top.
// Returns the logits row after seq[n-1].
static const float *plain_feed(GPT *g, const int *seq, int n) {
    int S = g->config.block_size;
    if (g->state.kv_len < S) return forward(g, seq + n - 1, 1, NULL);
    g->state.kv_len = 0;
    return forward(g, seq + n - S / 2, S / 2, NULL) + (size_t)(S / 2 - 1) * g->config.vocab_size;
}

// Exact joints of the generated characters after the prompt as served (s: temperature,
// top-k, top-p), from plain forward passes under plain decoding's context rule (the
// prompt's last S tokens from position 0, then plain_feed): joint12 of the 1st and 2nd,
// p(x1) p(x2 | x1), and joint23 of the 2nd and 3rd, sum over x1 of p(x1) p(x2 | x1)
// p(x3 | x1 x2). A prompt of S tokens fills the cache, so x1 is fed by a refill over the
// last S/2 tokens: the window a folded round must verify on.
static void exact_joint(GPT *g, const int *prompt, int np, const Sampler *s, double *joint12,
                        double *joint) {
    int V = g->config.vocab_size, S = g->config.block_size, n0 = np < S ? np : S;
    float *p1 = malloc((size_t)V * sizeof(float)), *p2 = malloc((size_t)V * sizeof(float)),
          *p3 = malloc((size_t)V * sizeof(float));
    int *seq = malloc((size_t)(np + 2) * sizeof(int));
    memcpy(seq, prompt, (size_t)np * sizeof(int));
    memset(joint, 0, (size_t)V * V * sizeof(double));
    memset(joint12, 0, (size_t)V * V * sizeof(double));
    g->state.kv_len = 0;
    const float *lg = forward(g, prompt + np - n0, n0, NULL);
    served_probs(p1, lg + (size_t)(n0 - 1) * V, V, s);
    int prompt_cached = 1; // the prompt's positions hold it (a refill overwrites them)
    for (int x1 = 0; x1 < V; x1++) {
        if (p1[x1] == 0.0f) continue;
        if (!prompt_cached && n0 < S) { // x1 runs on top of the prompt: run it again
            g->state.kv_len = 0;
            forward(g, prompt + np - n0, n0, NULL);
        }
        prompt_cached = n0 < S; // else x1 is fed by a refill
        g->state.kv_len = n0;
        seq[np] = x1;
        served_probs(p2, plain_feed(g, seq, np + 1), V, s);
        int kv1 = g->state.kv_len;
        for (int x2 = 0; x2 < V; x2++) joint12[x1 * V + x2] = (double)p1[x1] * p2[x2];
        for (int x2 = 0; x2 < V; x2++) {
            double w = (double)p1[x1] * p2[x2];
            if (w < 1e-13) continue; // the cells skipped hold < 65 * 65 * 1e-13 in all
            g->state.kv_len = kv1;
            if (kv1 == S) prompt_cached = 0; // x2 is fed by a refill
            seq[np + 1] = x2;
            served_probs(p3, plain_feed(g, seq, np + 2), V, s);
            for (int x3 = 0; x3 < V; x3++) joint[x2 * V + x3] += w * p3[x3];
        }
    }
    free(p1); free(p2); free(p3); free(seq);
}

// One end-to-end case: a draft (with its --draft-p-min), a served distribution, a prompt
// (NULL: S tokens of the corpus, which fill the cache), how many runs, and the bugs it
// can see (a broken build runs only the cases that can see its bug).
typedef struct {
    const char *what;
    Draft *draft;
    float p_min;
    Sampler s;
    const char *prompt;
    long runs, runs_san;
    int catches;
} JointCase;

// What the first round of each run did (test_generate's hook), summed over the runs.
typedef struct {
    const SpecBuffers *b;
    int round;                      // rounds so far in this run
    long restarted, stopped, went_on; // first rounds that restarted the cache, whose draft
                                      // stopped before the guesses asked for (p_min), and
                                      // whose draft went on past a first guess
} FirstRounds;

static void watch_first_round(void *ctx, const GPT *g, const int *seq, int n_seq) {
    FirstRounds *w = ctx;
    (void)g; (void)seq; (void)n_seq;
    if (w->round++ > 0) return;
    w->restarted += w->b->restarted;
    w->stopped += w->b->drafted < w->b->asked;
    w->went_on += w->b->drafted >= 2;
}

#define CORPUS_AT 5000 // where the prompts that fill the context are cut from the corpus

static void test_joint(Fixture *fx) {
    int all_bugs = CATCH_RESIDUAL | CATCH_RATIO | CATCH_TRIM;
    if (!runs(all_bugs | CATCH_DRAFT_Q | CATCH_CUT | CATCH_FOLD | CATCH_P_MIN)) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, N_NEW = 5;
    JointCase cases[] = {
        {"bigram draft", &fx->draft, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\n", 30000, 500, all_bugs},
        {"bigram draft", &fx->draft, 0.0f, {0.7f, 0, 0.0f}, "ROMEO:\n", 30000, 500,
         all_bugs | CATCH_DRAFT_Q},
        // the model draft (its own cache, caught up on the prompt in its first pass)
        {"gpt draft", &fx->gpt, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\n", 6000, 100, all_bugs},
        // the served cut: the cut bugs' cases (the others are caught above already)
        {"gpt draft", &fx->gpt, 0.0f, {1.0f, 3, 0.0f}, "ROMEO:\n", 6000, 100, CATCH_CUT},
        {"gpt draft", &fx->gpt, 0.0f, {1.0f, 0, 0.6f}, "ROMEO:\n", 6000, 100, CATCH_CUT},
        // prompt lookup: a repeated prompt, so the round after 'E' copies "O:\nR"; its
        // rounds are too short for the untrimmed cache to show in characters 2 and 3
        {"lookup draft", &fx->lookup, 0.0f, {1.0f, 0, 0.0f}, "ROMEO:\nROMEO:\nROM", 6000, 100,
         CATCH_RESIDUAL | CATCH_RATIO},
        // a prompt of S tokens fills the cache: the first round restarts it, and its one
        // verify pass reruns the window plain decoding refills with, then judges the guesses
        // (the other bugs are caught above already: only BREAK_FOLD's build runs these)
        {"bigram draft", &fx->draft, 0.0f, {1.0f, 0, 0.0f}, NULL, 5000, 40, CATCH_FOLD},
        {"gpt draft", &fx->gpt, 0.0f, {1.0f, 0, 0.0f}, NULL, 3000, 30, CATCH_FOLD},
        // --draft-p-min: the drafts stop after a guess they are unsure of
        {"bigram draft", &fx->draft, 0.3f, {1.0f, 0, 0.0f}, "ROMEO:\n", 6000, 100, CATCH_P_MIN},
        {"gpt draft", &fx->gpt, 0.3f, {1.0f, 0, 0.0f}, "ROMEO:\n", 4000, 50, CATCH_P_MIN},
    };
    enum { N_CASES = sizeof(cases) / sizeof(cases[0]) };
    int n_cases = N_CASES, all_ok = 1;
    // the exact joints of each case (joints[ci] of characters 1 and 2, then of 2 and 3),
    // computed once for the cases that share a prompt and a serving (seconds each in the
    // sanitizer build)
    double *joints[N_CASES] = {0};
    long *counts = malloc((size_t)V * V * sizeof(long)),
         *counts12 = malloc((size_t)V * V * sizeof(long));
    SpecBuffers b;
    build_spec_buffers(&b, K, V, S);
    for (int ci = 0; ci < n_cases; ci++) {
        JointCase *c = &cases[ci];
        if (!runs(c->catches)) continue;
        long runs_n = SANITIZED ? c->runs_san : c->runs;
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
        DecodeOptions o = {.sampler = c->s, .K = K, .vocab = &fx->vocab};
        FirstRounds w = {.b = &b};
        long full_rounds = 0;
        c->draft->p_min = c->p_min;
        for (long run = 0; run < runs_n; run++) {
            Rng r;
            rng_seed(&r, 1000000 * (ci + 1) + (uint64_t)run);
            Stats st;
            memset(&st, 0, sizeof(st));
            w.round = 0;
            o.n_new = N_NEW;
            o.rng = &r;
            o.st = &st;
            test_generate(g, c->draft, &b, &(Tokens){prompt, np}, &o, seq, ROUND,
                          watch_first_round, &w);
            counts12[seq[np] * V + seq[np + 1]]++;
            counts[seq[np + 1] * V + seq[np + 2]]++;
            full_rounds += st.drafted >= K;
        }
        c->draft->p_min = 0.0f;
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
                  "rounds, %ld restarted the cache, %ld stopped drafting before the %d guesses "
                  "asked for, %ld drafted 2 or more", c->what, how, served, runs_n,
                  w.restarted, w.stopped, K, w.went_on);
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
                             "speculative_generate's loop (test_generate, -n %d; the rounds "
                             "draft %d or more in %ld runs): joint of generated characters 2 "
                             "and 3 (the first two the speculative rounds emit) vs the exact "
                             "joint of the served distribution from plain passes: X2 = %.1f on "
                             "%d df (%d of %d cells pooled), p-value %.3g, %ld draws of p = 0 "
                             "pairs", c->what, how, shown, K, served, runs_n, N_NEW, K,
                             full_rounds, cs.stat, cs.cells - 1, cs.pooled, V * V, cs.pvalue,
                             cs.zero_hits);
        free(seq);
    }
    free_spec_buffers(&b);
    for (int ci = 0; ci < n_cases; ci++) {
        int shared = 0; // free each array once
        for (int j = 0; j < ci; j++) shared |= joints[j] == joints[ci];
        if (!shared) free(joints[ci]);
    }
    free(counts); free(counts12);
    broken_verdict(all_ok, "speculative_generate's characters are not distributed as plain "
                   "decoding's");
}

// ----------------------------------------------------------------------------
// 3. The mutants' round and loop are the real ones when no bug is planted

// Zeroes the wall times of st, the only fields two runs of the same decoding may differ in.
static void clear_times(Stats *st) {
    st->seconds = st->draft_seconds = 0.0;
    for (int i = 0; i < N_PASS_KINDS; i++) st->pass[i].seconds = 0.0;
    for (int i = 0; i < PASS_SIZES; i++) st->size[i].seconds = 0.0;
}

// test_generate and test_round, the loop and the round the broken builds run, must be
// speculative_generate and speculative_round in the correct build: test_generate running
// speculative_round, and test_generate running test_round, each give
// speculative_generate's text, token sources (Output.source), Stats (but wall times) and
// final cache lengths (the target's and the model draft's) from the same seed, with each
// draft and each way of serving (--draft-p-min too), over runs long enough to restart the
// cache many times (and, as a rule, to take k = 0 steps at its last slot).
static void test_round_faithful(Fixture *fx) {
    if (BUG) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, prompt[64];
    int N_NEW = (SANITIZED ? 2 : 8) * S + 20; // past the first restart, whatever S is
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt), cap = np + N_NEW;
    int *text[3];
    unsigned char *source[3];
    for (int i = 0; i < 3; i++) {
        text[i] = malloc((size_t)cap * sizeof(int));
        source[i] = malloc((size_t)cap);
    }
    SpecBuffers b;
    build_spec_buffers(&b, K, V, S);
    Draft *drafts[3] = {&fx->draft, &fx->gpt, &fx->lookup};
    struct { Sampler s; float p_min; } served[5] = {
        {{1.0f, 0, 0.0f}, 0.0f}, {{0.0f, 0, 0.0f}, 0.0f}, {{1.0f, 5, 0.9f}, 0.0f},
        {{1.0f, 0, 0.0f}, 0.4f}, {{0.7f, 0, 0.0f}, 0.0f}};
    int n_served = SANITIZED ? 4 : 5; // t = 0.7 takes no path t = 1 does not
    RoundFn rounds[3] = {NULL, speculative_round, test_round}; // NULL: speculative_generate
    for (int di = 0; di < 3; di++) {
        for (int si = 0; si < n_served; si++) {
            Draft *d = drafts[di];
            if (served[si].p_min > 0.0f && d->kind == DRAFT_LOOKUP) continue; // not for lookup
            d->p_min = served[si].p_min;
            Stats st[3];
            int kv[3], kv_draft[3];
            for (int which = 0; which < 3; which++) {
                Output out = {.stream = NULL, .source = source[which], .color = 0};
                DecodeOptions o = {.sampler = served[si].s, .K = K, .vocab = &fx->vocab,
                                   .out = &out};
                memset(&st[which], 0, sizeof(Stats));
                memset(source[which], 0xff, (size_t)cap);
                Rng r;
                rng_seed(&r, 31 + si);
                o.n_new = N_NEW;
                o.rng = &r;
                o.st = &st[which];
                if (!rounds[which])
                    speculative_generate(g, d, &b, &(Tokens){prompt, np}, &o, text[which]);
                else
                    test_generate(g, d, &b, &(Tokens){prompt, np}, &o, text[which],
                                  rounds[which], NULL, NULL);
                clear_times(&st[which]); // wall times are the only fields that may differ
                kv[which] = g->state.kv_len;
                kv_draft[which] = d->model.state.kv_len;
            }
            d->p_min = 0.0f;
            int same[3] = {1, 1, 1};
            for (int which = 1; which < 3; which++)
                same[which] = memcmp(text[0], text[which], (size_t)cap * sizeof(int)) == 0 &&
                              memcmp(source[0], source[which], (size_t)cap) == 0 &&
                              memcmp(&st[0], &st[which], sizeof(Stats)) == 0 &&
                              kv[0] == kv[which] && kv_draft[0] == kv_draft[which];
            char name[64];
            sampler_name(name, sizeof(name), &served[si].s);
            if (served[si].p_min > 0.0f)
                snprintf(name + strlen(name), sizeof(name) - strlen(name), " p_min %g",
                         served[si].p_min);
            const Stats *sa = &st[0];
            check(same[1] && same[2] && sa->rounds > 0 && sa->pass[PASS_FOLDED].passes > 0,
                  "test_generate with speculative_round (%s) and with test_round (%s), %s "
                  "draft, %s, K=%d, %d tokens: the same text, token sources, Stats and final "
                  "cache lengths (target %d, %d, %d; draft %d, %d, %d) as "
                  "speculative_generate (%ld rounds, %ld empty, %ld accepted, %ld draft "
                  "passes, %ld PASS_FOLDED rounds that restarted the cache, %ld PASS_STEP "
                  "rounds of one token)",
                  same[1] ? "same" : "DIFFERS", same[2] ? "same" : "DIFFERS", d->name, name, K,
                  N_NEW, kv[0], kv[1], kv[2], kv_draft[0], kv_draft[1], kv_draft[2],
                  sa->rounds, sa->empty_rounds, sa->accepted, sa->draft_passes,
                  sa->pass[PASS_FOLDED].passes, sa->pass[PASS_STEP].passes);
        }
    }
    free_spec_buffers(&b);
    for (int i = 0; i < 3; i++) {
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
    memcpy(b->q_draft, q, (size_t)V * sizeof(float));
    memcpy(b->p_target, p, (size_t)V * sizeof(float));
    memcpy(b->p_target + V, p, (size_t)V * sizeof(float));
    return accept_reject(b, 1, allow_bonus, &r);
}

static void test_forced_edges(void) {
    if (BUG) return;
    enum { V = 5 };
    SpecBuffers b;
    build_spec_buffers(&b, 1, V, 2);
    // p/q at candidate 0 is 1/3; the residual max(0, p - q) = {0, .2, 0, .2, 0}
    float p[V] = {0.1f, 0.4f, 0.2f, 0.3f, 0.0f}, q[V] = {0.3f, 0.2f, 0.2f, 0.1f, 0.2f};
    int n1 = forced_accept(&b, V, 0, q, p, 0.0, 0.0, 0), r1 = b.rejected_at;
    int n2 = forced_accept(&b, V, 0, q, p, U_BELOW_1, 0.0, 0), r2 = b.rejected_at,
        t2 = b.accepted[0];
    int n3 = forced_accept(&b, V, 0, q, p, U_BELOW_1, U_BELOW_1, 0), t3 = b.accepted[0];
    int n4 = forced_accept(&b, V, 4, q, p, 0.0, 0.0, 0), r4 = b.rejected_at, t4 = b.accepted[0];
    check(n1 == 1 && r1 == -1 && n2 == 1 && r2 == 0 && t2 == 1 && n3 == 1 && t3 == 3 &&
          n4 == 1 && r4 == 0 && t4 == 1,
          "forced u: p/q = 1/3 accepts at u = 0 (rejected_at %d), rejects at u = 1-2^-53 "
          "(rejected_at %d); the residual {0,.2,0,.2,0} gives token %d at u = 0 and %d at "
          "u = 1-2^-53 (want 1, 3); p(c) = 0 rejects even at u = 0 (rejected_at %d, then %d)",
          r1, r2, t2, t3, r4, t4);
    // the bonus at the ends of [0, 1): the first and last tokens with mass
    int nb0 = forced_accept(&b, V, 1, q, p, 0.0, 0.0, 1), b0 = b.accepted[1];
    int nb1 = forced_accept(&b, V, 1, q, p, 0.0, U_BELOW_1, 1), b1 = b.accepted[1];
    check(nb0 == 2 && nb1 == 2 && b0 == 0 && b1 == 3, "forced u: the bonus after an accepted "
          "candidate is token %d at u = 0 and %d at u = 1-2^-53 (want 0 and 3: 4 has p = 0)",
          b0, b1);
    // a residual with no mass: p <= q everywhere (p sums to 1 - 2^-24 in float)
    float qz[2] = {0.5f, 0.5f}, pz[2] = {0.5f, 0.5f - 0x1p-24f};
    SpecBuffers b2;
    build_spec_buffers(&b2, 1, 2, 2);
    int nz0 = forced_accept(&b2, 2, 1, qz, pz, U_BELOW_1, 0.0, 0), z0 = b2.accepted[0],
        rz = b2.rejected_at;
    int nz1 = forced_accept(&b2, 2, 1, qz, pz, U_BELOW_1, U_BELOW_1, 0), z1 = b2.accepted[0];
    int finite = b2.residual[0] == 0.0f && b2.residual[1] == 0.0f;
    check(nz0 == 1 && rz == 0 && z0 == 0 && nz1 == 1 && z1 == 1 && finite,
          "a residual that sums to zero (p <= q everywhere): the rejection (rejected_at %d) "
          "draws from p instead, token %d at u = 0 and %d at u = 1-2^-53 (want 0, 1), "
          "residual row all zero, no NaN", rz, z0, z1);
    free_spec_buffers(&b);
    free_spec_buffers(&b2);
}

// Greedy speculative text == greedy plain text, for one prompt, K and length: the loop
// the broken builds run (test_generate with ROUND) against plain decoding (generate).
// *diff_at: the index of the first generated token that differs, or -1.
static int greedy_same(Fixture *fx, Draft *d, const int *prompt, int np, int K,
                       int n_new, Stats *sp_out, int *diff_at) {
    GPT *g = &fx->model;
    int V = g->config.vocab_size, start = np > 0 ? np : 1, cap = start + n_new;
    int *a = malloc((size_t)cap * sizeof(int)), *c = malloc((size_t)cap * sizeof(int));
    float *p = malloc((size_t)V * sizeof(float));
    SpecBuffers b;
    build_spec_buffers(&b, K, V, g->config.block_size);
    DecodeOptions o = {.sampler = {0.0f, 0, 0.0f}, .K = K, .vocab = &fx->vocab};
    Stats sp, pl;
    memset(&sp, 0, sizeof(sp));
    memset(&pl, 0, sizeof(pl));
    Rng r;
    rng_seed(&r, 5);
    o.n_new = n_new;
    o.rng = &r;
    o.st = &sp;
    test_generate(g, d, &b, &(Tokens){prompt, np}, &o, a, ROUND, NULL, NULL);
    rng_seed(&r, 5);
    o.n_new = n_new;
    o.rng = &r;
    o.st = &pl;
    generate(g, &(Tokens){prompt, np}, &o, c, p);
    int same = sp.emitted == n_new && pl.emitted == n_new &&
               memcmp(a, c, (size_t)cap * sizeof(int)) == 0;
    *diff_at = -1;
    for (int i = start; i < cap && *diff_at < 0; i++)
        if (a[i] != c[i]) *diff_at = i - start;
    if (sp_out) *sp_out = sp;
    free_spec_buffers(&b);
    free(a); free(c); free(p);
    return same;
}

// " (the first difference at generated token N)", or "" when there is none.
static const char *diff_note(char *buf, size_t n, int diff_at) {
    if (diff_at < 0) return "";
    snprintf(buf, n, " (the first difference at generated token %d)", diff_at);
    return buf;
}

// Greedy decoding, where speculative decoding must give plain decoding's text token for
// token: K against the tokens still needed and the cache's room, each draft (with
// --draft-p-min too), a prompt that fills the context, a draft that never agrees. Every
// run but the first restarts the cache (folded rounds) and reaches its last slot, so
// BREAK_FOLD must change the text.
static void test_edge_runs(Fixture *fx) {
    if (!runs(CATCH_FOLD)) return;
    GPT *g = &fx->model;
    int S = g->config.block_size, V = g->config.vocab_size, prompt[64], at, all_ok = 1;
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    char dn[80];
    Stats st;
    // K larger than what is still needed: a round drafts only what is wanted
    int ok = greedy_same(fx, &fx->draft, prompt, np, 8, 3, &st, &at);
    all_ok &= case_check(ok && st.emitted == 3 && st.drafted <= 2, "K = 8 with -n 3: %ld tokens, "
                         "%ld drafted in %ld rounds (at most 2 still needed), same text as plain "
                         "greedy%s", st.emitted, st.drafted, st.rounds,
                         diff_note(dn, sizeof(dn), at));
    ok = greedy_same(fx, &fx->draft, prompt, np, 1, 200, &st, &at);
    all_ok &= case_check(ok && st.drafted == st.rounds - st.pass[PASS_STEP].passes &&
                         st.round_tokens <= 2 * st.rounds && st.pass[PASS_FOLDED].passes > 0,
                         "K = 1: 200 greedy tokens equal plain decoding%s; %ld rounds drafted "
                         "one token each (%ld drafted), but the %ld PASS_STEP rounds at the "
                         "cache's last slot, and emitted %ld; %ld PASS_FOLDED rounds restarted "
                         "the cache",
                         diff_note(dn, sizeof(dn), at), st.rounds, st.drafted,
                         st.pass[PASS_STEP].passes, st.round_tokens,
                         st.pass[PASS_FOLDED].passes);
    // K = S - 1: every round is cut to the cache's room
    ok = greedy_same(fx, &fx->draft, prompt, np, S - 1, 200, &st, &at);
    all_ok &= case_check(ok && st.pass[PASS_FOLDED].passes > 0, "K = block_size - 1 = %d: 200 "
                         "greedy tokens equal plain decoding%s (%ld rounds, %ld drafted, %ld "
                         "PASS_FOLDED, %ld PASS_STEP)", S - 1,
                         diff_note(dn, sizeof(dn), at), st.rounds, st.drafted,
                         st.pass[PASS_FOLDED].passes, st.pass[PASS_STEP].passes);
    // every draft, greedy: the model draft's cache and lookup's short rounds change no
    // token, and neither does --draft-p-min (it reads only the draft)
    struct { Draft *d; float p_min; } drafts[5] = {{&fx->draft, 0.0f}, {&fx->gpt, 0.0f},
        {&fx->lookup, 0.0f}, {&fx->draft, 0.3f}, {&fx->gpt, 0.7f}};
    for (int di = 0; di < 5; di++) {
        int n_new = SANITIZED ? 100 : 300;
        drafts[di].d->p_min = drafts[di].p_min;
        ok = greedy_same(fx, drafts[di].d, prompt, np, 4, n_new, &st, &at);
        drafts[di].d->p_min = 0.0f;
        char how[48] = "";
        if (drafts[di].p_min > 0.0f)
            snprintf(how, sizeof(how), " with --draft-p-min %g", drafts[di].p_min);
        all_ok &= case_check(ok && st.rounds > 0 && st.pass[PASS_FOLDED].passes > 0,
                             "%s draft%s, K = 4: %d greedy tokens equal plain decoding%s (%ld "
                             "rounds, %ld empty, %ld drafted, %ld accepted, %ld draft passes, "
                             "%ld PASS_FOLDED, %ld PASS_STEP)",
                             drafts[di].d->name, how, n_new, diff_note(dn, sizeof(dn), at),
                             st.rounds, st.empty_rounds, st.drafted, st.accepted,
                             st.draft_passes, st.pass[PASS_FOLDED].passes,
                             st.pass[PASS_STEP].passes);
    }
    // a prompt of exactly S tokens: the cache is full after the prefill, and the first
    // round restarts it (with every draft)
    int full[64];
    memcpy(full, fx->corpus.tokens + CORPUS_AT, (size_t)S * sizeof(int));
    for (int di = 0; di < 3; di++) {
        int n_new = SANITIZED ? 50 : 100;
        ok = greedy_same(fx, drafts[di].d, full, S, 4, n_new, &st, &at);
        all_ok &= case_check(ok && st.pass[PASS_FOLDED].passes > 0, "a prompt that fills the "
                             "context (%d tokens), %s draft, K = 4: %d greedy tokens equal "
                             "plain decoding%s (%ld PASS_FOLDED rounds restarted the cache, "
                             "the first of them round 1)", S, drafts[di].d->name, n_new,
                             diff_note(dn, sizeof(dn), at),
                             st.pass[PASS_FOLDED].passes);
    }
    // a draft that never agrees: every row one-hot at a token greedy decoding never emits
    int plain_seq[512];
    float *p = malloc((size_t)V * sizeof(float));
    DecodeOptions o = {.sampler = {0.0f, 0, 0.0f}, .K = 4, .vocab = &fx->vocab};
    Stats pl;
    memset(&pl, 0, sizeof(pl));
    Rng r;
    rng_seed(&r, 1);
    o.n_new = 300;
    o.rng = &r;
    o.st = &pl;
    generate(g, &(Tokens){prompt, np}, &o, plain_seq, p);
    int seen[256] = {0}, never = -1;
    for (int i = 0; i < np + 300; i++) seen[plain_seq[i]] = 1;
    for (int x = V - 1; x >= 0 && never < 0; x--) if (!seen[x]) never = x;
    float *table = malloc((size_t)V * V * sizeof(float));
    for (int i = 0; i < V * V; i++) table[i] = (i % V) == never ? 1.0f : 0.0f;
    Draft contrary = {.kind = DRAFT_BIGRAM, .name = "contrary", .V = V,
                      .bigram = {V, table}};
    ok = never >= 0 && greedy_same(fx, &contrary, prompt, np, 4, 300, &st, &at);
    all_ok &= case_check(ok && st.accepted == 0 && st.round_tokens == st.rounds && st.bonus == 0 &&
                         st.pass[PASS_FOLDED].passes > 0, "a draft that never agrees (always "
                         "'%c'): 300 greedy tokens equal plain decoding%s; %ld rounds, %ld "
                         "accepted, %ld round tokens (exactly one per round), %ld PASS_FOLDED",
                         never >= 0 ? fx->vocab.chars[never] : '?', diff_note(dn, sizeof(dn), at),
                         st.rounds, st.accepted, st.round_tokens, st.pass[PASS_FOLDED].passes);
    free(table);
    free(p);
    broken_verdict(all_ok, "greedy speculative text differs from plain greedy text");
}

// The target as its own draft: the draft rows come from one-token target passes served
// as the verify pass serves its rows, which recomputes them bit for bit, so every
// candidate passes (with a top-k/top-p cut too: both sides are cut alike).
static void test_self_draft(Fixture *fx) {
    if (BUG) return;
    GPT *g = &fx->model;
    int V = g->config.vocab_size, S = g->config.block_size, K = 4, prompt[64];
    int np = encode_str(&fx->vocab, "ROMEO:\n", prompt);
    SpecBuffers b;
    build_spec_buffers(&b, K, V, S);
    Sampler served[3] = {{1.0f, 0, 0.0f}, {0.7f, 0, 0.0f}, {1.0f, 10, 0.9f}};
    for (int si = 0; si < 3; si++) {
        const Sampler *s = &served[si];
        Rng r;
        rng_seed(&r, 77 + si);
        g->state.kv_len = 0;
        const float *lg = forward(g, prompt, np, NULL);
        served_probs(b.p_next, lg + (size_t)(np - 1) * V, V, s);
        int current = sample_from(b.p_next, V, rng_uniform(&r));
        long rounds = 0, all_in = 0, rows_equal = 0, emitted = 0;
        while (S - 1 - g->state.kv_len >= K) {
            int before = g->state.kv_len, tok = current;
            // draft with the target itself, one token at a time, then forget those passes
            for (int i = 0; i < K; i++) {
                served_probs(b.q_draft + (size_t)i * V, forward(g, &tok, 1, NULL), V, s);
                tok = b.candidates[i] = sample_from(b.q_draft + (size_t)i * V, V,
                                                    rng_uniform(&r));
            }
            trim_kv_cache(g, NULL, 0, before);
            verify_candidates(g, &(Tokens){&current, 1}, K, s, &b); // b.lag: 0, as built
            rows_equal += memcmp(b.p_target, b.q_draft, (size_t)K * V * sizeof(float)) == 0;
            int n = accept_reject(&b, K, 1, &r);
            trim_kv_cache(g, NULL, n, before);
            all_in += n == K + 1 && b.rejected_at < 0;
            emitted += n;
            current = b.accepted[n - 1];
            rounds++;
        }
        char name[64];
        sampler_name(name, sizeof(name), s);
        check(rounds > 0 && all_in == rounds && rows_equal == rounds,
              "self-draft %s: the target drafting for itself: %ld of %ld rounds accepted "
              "all %d drafts and took the bonus (%ld tokens), verify rows == draft rows bit for "
              "bit in %ld rounds", name, all_in, rounds, K, emitted, rows_equal);
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
    const SpecBuffers *b;
    const Stats *st;
    Sampler s;           // how the rows are served
    int K, first, n_new; // the draft length; where the generated text starts, its length
    int *toks;           // (first + n_new + K) scratch: the text before a round, its guesses
    float *row;          // (V) scratch: one served row of a fresh pass
    int rule_kv;         // the rule's cache length before the next round's current_token
    int n_prev;          // the text's length before the round
    long rounds, bad_cache, bad_rows, first_bad, draft_checked;
    long folded, edge, zero_rounds, stopped, bad_asked; // by the rule, and the code's k
    long last_drafted;
    PassTally kind[N_PASS_KINDS], size[PASS_SIZES]; // the target's passes by the rule
    double sum_beta, var_beta; // sum over judged positions of beta and beta (1 - beta)
    long judged;
} CacheWatch;

// Whether the first n positions of g's cache equal fresh's after a prefill over toks,
// bit for bit, every layer, keys and values (keys and values by position: (L, S, C)).
static int cache_equals_prefill(const GPT *g, GPT *fresh, const int *toks, int n) {
    const Config *c = &g->config;
    size_t S = c->block_size, C = c->n_embd;
    fresh->state.kv_len = 0;
    if (n > 0) forward(fresh, toks, n, NULL);
    int ok = 1;
    for (int l = 0; l < c->n_layer && ok; l++) {
        size_t off = l * S * C, bytes = (size_t)n * C * sizeof(float);
        ok = memcmp(g->state.key_cache + off, fresh->state.key_cache + off, bytes) == 0 &&
             memcmp(g->state.value_cache + off, fresh->state.value_cache + off, bytes) == 0;
    }
    return ok;
}

// Adds a target pass of T tokens to a kind's tally and a size's (as count_pass sorts them).
static void tally(CacheWatch *w, PassKind kind, int T) {
    PassTally *by_size = &w->size[T < PASS_SIZES - 1 ? T : PASS_SIZES - 1];
    w->kind[kind].passes++;
    w->kind[kind].tokens += T;
    by_size->passes++;
    by_size->tokens += T;
}

// test_generate's hook after every round. The round began with the text seq[0 .. n_prev-1]
// (current_token last) and a cache that plain decoding's rule says holds rule_kv tokens:
// a full cache (S) restarts, so the round's context is the S/2 - 1 tokens before
// current_token (the refill's window), else those rule_kv tokens. Checks, bit for bit:
// the round's k+1 served rows (p_target) against plain decoding's rows on a fresh model,
// current_token and then each guess fed one by one by the rule (plain_feed) on top of
// that context; the live cache's length against the rule fed every token the round
// emitted but the last, and its contents against a fresh prefill over those tokens; a
// model draft's cache against a fresh prefill of the draft over the first of them (it may
// lag: never run the last guess of a bonus round or of a k = 0 round, or not caught up on a
// restart's window). Tallies the round's pass by the rule (a folded pass of S/2 + k tokens
// after a restart, else 1 + k: a verify pass, or a one-token step when k = 0), checks the
// guesses asked for (K, the tokens still needed, and the room S - 1 - context), and adds
// up beta = sum_x min(p(x), q(x)) over the positions the round judged.
static void watch_round(void *ctx, const GPT *g, const int *seq, int n_seq) {
    CacheWatch *w = ctx;
    const SpecBuffers *b = w->b;
    int kv = g->state.kv_len, V = g->config.vocab_size, S = g->config.block_size;
    int n_prev = w->n_prev, k = (int)(w->st->drafted - w->last_drafted);
    int restart = w->rule_kv == S, context = restart ? S / 2 - 1 : w->rule_kv;
    int remaining = w->n_new - (n_prev - w->first), asked = w->K;
    if (asked > remaining) asked = remaining;
    if (asked > S - 1 - context) asked = S - 1 - context;
    w->rounds++;
    w->bad_asked += b->asked != asked || k > asked;
    // the rows: the context, then current_token and the guesses fed one by one
    memcpy(w->toks, seq, (size_t)n_prev * sizeof(int));
    memcpy(w->toks + n_prev, b->candidates, (size_t)k * sizeof(int));
    w->fresh.state.kv_len = 0;
    if (restart) w->fresh.state.kv_len = S; // full: the first feed refills it
    else if (w->rule_kv > 0) forward(&w->fresh, w->toks + n_prev - 1 - w->rule_kv, w->rule_kv, NULL);
    int rows_ok = 1;
    for (int i = 0; i <= k; i++) {
        served_probs(w->row, plain_feed(&w->fresh, w->toks, n_prev + i), V, &w->s);
        rows_ok &= memcmp(w->row, b->p_target + (size_t)i * V, (size_t)V * sizeof(float)) == 0;
    }
    // the cache: the rule fed current_token and every emitted token but the last
    int after = w->rule_kv;
    for (int j = n_prev - 1; j <= n_seq - 2; j++) after = after == S ? S / 2 : after + 1;
    const int *window = seq + n_seq - 1 - after; // the tokens the target's cache must hold
    int cache_ok = kv == after && cache_equals_prefill(g, &w->fresh, window, after);
    if (cache_ok && w->d->kind == DRAFT_GPT) {
        const GPT *m = &w->d->model;
        int kvd = m->state.kv_len;
        cache_ok = kvd >= 0 && kvd <= kv && cache_equals_prefill(m, &w->fresh_draft, window, kvd);
        w->draft_checked++;
    }
    w->bad_cache += !cache_ok;
    w->bad_rows += !rows_ok;
    if ((!cache_ok || !rows_ok) && w->first_bad == 0) w->first_bad = w->rounds;
    // the round's pass and shape, by the rule
    tally(w, restart ? PASS_FOLDED : k > 0 ? PASS_VERIFY : PASS_STEP, (restart ? S / 2 : 1) + k);
    w->folded += restart;
    w->edge += context == S - 1;
    w->zero_rounds += k == 0;
    w->stopped += k > 0 && k < b->asked; // --draft-p-min (lookup: the text ran out)
    // the judged positions: up to and including a rejected one
    int judged = b->rejected_at >= 0 ? b->rejected_at + 1 : k;
    for (int i = 0; i < judged; i++) {
        double beta = 0.0;
        for (int x = 0; x < V; x++)
            beta += fmin(b->p_target[(size_t)i * V + x], b->q_draft[(size_t)i * V + x]);
        w->sum_beta += beta;
        w->var_beta += beta * (1.0 - beta);
        w->judged++;
    }
    w->rule_kv = after;
    w->n_prev = n_seq;
    w->last_drafted = w->st->drafted;
}

// A copy of m's weights with a cache of its own.
static void clone_gpt(GPT *out, const GPT *m) {
    if (build_gpt(out, &m->config) != 0) {
        fprintf(stderr, "test_exact: out of memory for a fresh model\n");
        exit(1);
    }
    memcpy(out->params, m->params, m->n_params * sizeof(float));
}

// Whether the Stats' passes, by kind and by size, are the test's tally by the rule.
static int passes_match(const Stats *st, const CacheWatch *w) {
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
    struct { Draft *d; float p_min; Sampler s; int n_new, n_new_san; } cases[] = {
        {&fx->draft, 0.0f, {1.0f, 0, 0.0f}, 2000, 120},
        {&fx->draft, 0.0f, {0.7f, 0, 0.0f}, 2000, 100},
        {&fx->draft, 0.0f, {0.0f, 0, 0.0f}, 2000, 100},
        {&fx->gpt, 0.0f, {1.0f, 0, 0.0f}, 1000, 50},
        {&fx->gpt, 0.0f, {1.0f, 5, 0.9f}, 1000, 50},
        {&fx->gpt, 0.7f, {1.0f, 0, 0.0f}, 1000, 50},
        {&fx->lookup, 0.0f, {1.0f, 0, 0.0f}, 1000, 50},
    };
    int n_cases = (int)(sizeof(cases) / sizeof(cases[0])), all_ok = 1;
    long all_folded = 0, all_edge = 0;
    SpecBuffers b;
    build_spec_buffers(&b, K, V, S);
    for (int ci = 0; ci < n_cases; ci++) {
        int N_NEW = SANITIZED ? cases[ci].n_new_san : cases[ci].n_new;
        Draft *d = cases[ci].d;
        int *seq = malloc((size_t)(np + N_NEW) * sizeof(int));
        CacheWatch w;
        memset(&w, 0, sizeof(w));
        clone_gpt(&w.fresh, g);
        if (d->kind == DRAFT_GPT) clone_gpt(&w.fresh_draft, &d->model);
        Stats st;
        memset(&st, 0, sizeof(st));
        w.d = d;
        w.b = &b;
        w.st = &st;
        w.s = cases[ci].s;
        w.K = K;
        w.first = np > 0 ? np : 1;
        w.n_new = N_NEW;
        w.toks = malloc((size_t)(np + N_NEW + K) * sizeof(int));
        w.row = malloc((size_t)V * sizeof(float));
        w.rule_kv = w.first < S ? w.first : S; // the prefill: the prompt's last S tokens
        w.n_prev = w.first + 1;                // and the token sampled from it
        tally(&w, PASS_PREFILL, w.rule_kv);
        DecodeOptions o = {.sampler = cases[ci].s, .K = K, .vocab = &fx->vocab};
        Rng r;
        rng_seed(&r, 4242 + ci);
        d->p_min = cases[ci].p_min;
        o.n_new = N_NEW;
        o.rng = &r;
        o.st = &st;
        test_generate(g, d, &b, &(Tokens){prompt, np}, &o, seq, ROUND, watch_round, &w);
        d->p_min = 0.0f;
        all_folded += w.folded;
        all_edge += w.edge;
        char first[64] = "", name[80], draft_note[96] = "";
        if (w.first_bad) snprintf(first, sizeof(first), "; the first in round %ld", w.first_bad);
        if (w.draft_checked)
            snprintf(draft_note, sizeof(draft_note), ", and the draft's cache a fresh prefill "
                     "of the draft over the first of them (%ld times)", w.draft_checked);
        sampler_name(name, sizeof(name), &cases[ci].s);
        if (cases[ci].p_min > 0.0f)
            snprintf(name + strlen(name), sizeof(name) - strlen(name), ", --draft-p-min %g "
                     "(stopped %ld drafts early)", cases[ci].p_min, w.stopped);
        const char *dn = d->name;
        all_ok &= case_check(w.rounds > 0 && w.bad_cache == 0 && w.bad_rows == 0 &&
                             st.rounds > N_NEW / 4 && st.pass[PASS_FOLDED].passes > 0,
                             "KV cache and verify rows, %s draft, %s, K=%d, %d tokens: after "
                             "each of %ld rounds (%ld PASS_FOLDED: restarted the cache and "
                             "verified on the refill's window; %ld k = 0 steps at the cache's "
                             "last slot) the round's k+1 served rows equal plain decoding's from "
                             "fresh passes over the rule's context, the target's cache has the "
                             "rule's length and equals a fresh prefill over the same tokens, "
                             "bit for bit, every layer, keys and values%s (%ld rounds differ in "
                             "the cache, %ld in the rows%s)", dn, name, K, N_NEW, w.rounds,
                             st.pass[PASS_FOLDED].passes, w.edge, draft_note, w.bad_cache,
                             w.bad_rows, first);
        if (BUG == 0) {
            // rounds that end in neither a resample nor a bonus: k = 0 ones (an empty
            // lookup round, or a step at the cache's last slot: one token from row 0) and
            // at most one last round that was not allowed a bonus
            long x = st.rounds - st.resampled - st.bonus - st.empty_rounds - w.edge;
            long passes = d->kind == DRAFT_GPT ? st.drafted : 0;
            check(st.emitted == N_NEW && st.emitted == 1 + st.round_tokens &&
                  st.round_tokens ==
                      st.accepted + st.resampled + st.bonus + st.empty_rounds + w.edge &&
                  x >= 0 && x <= 1 && w.zero_rounds == st.empty_rounds + w.edge &&
                  st.accepted + st.resampled == w.judged && st.draft_passes == passes &&
                  w.bad_asked == 0,
                  "counters, %s draft, %s: emitted %ld = 1 + %ld round tokens; round tokens = "
                  "accepted %ld + resampled %ld + bonus %ld + empty rounds %ld + k = 0 steps at "
                  "the cache's last slot %ld; rounds %ld = resampled + bonus + empty + steps + "
                  "%ld; rounds with k = 0: %ld; judged positions %ld = accepted + resampled; "
                  "draft passes %ld (%ld expected: one per guess of a model draft); %ld rounds "
                  "asked for other than min(K, tokens still needed, S - 1 - context) guesses",
                  dn, name, st.emitted, st.round_tokens, st.accepted, st.resampled, st.bonus,
                  st.empty_rounds, w.edge, st.rounds, x, w.zero_rounds, w.judged,
                  st.draft_passes, passes, w.bad_asked);
            // the target's passes: the prefill, then one per round, sorted by the rule
            check(target_passes(&st) == 1 + st.rounds && passes_match(&st, &w) &&
                  st.pass[PASS_REFILL].passes == 0,
                  "passes, %s draft, %s: %ld target passes = the prefill + one per round; by "
                  "kind (passes/tokens) prefill %ld/%ld, refill %ld/%ld, folded %ld/%ld, "
                  "verify %ld/%ld, step %ld/%ld, and by size, as the rule sorts them (the "
                  "test's tally: folded %ld/%ld, verify %ld/%ld, step %ld/%ld)", dn, name,
                  target_passes(&st), st.pass[PASS_PREFILL].passes,
                  st.pass[PASS_PREFILL].tokens, st.pass[PASS_REFILL].passes,
                  st.pass[PASS_REFILL].tokens, st.pass[PASS_FOLDED].passes,
                  st.pass[PASS_FOLDED].tokens, st.pass[PASS_VERIFY].passes,
                  st.pass[PASS_VERIFY].tokens, st.pass[PASS_STEP].passes,
                  st.pass[PASS_STEP].tokens, w.kind[PASS_FOLDED].passes,
                  w.kind[PASS_FOLDED].tokens, w.kind[PASS_VERIFY].passes,
                  w.kind[PASS_VERIFY].tokens, w.kind[PASS_STEP].passes,
                  w.kind[PASS_STEP].tokens);
            // the Stats' own alpha: the same positions, the same sum, in the same order
            double alpha = w.judged ? w.sum_beta / w.judged : 0.0;
            check(st.judged == w.judged && st.judged == st.accepted + st.resampled &&
                  fabs(st.alpha_sum - w.sum_beta) <= 1e-9 * (1.0 + w.sum_beta) &&
                  fabs(stats_alpha(&st) - alpha) <= 1e-12,
                  "alpha, %s draft, %s: Stats.judged %ld == %ld judged positions seen after "
                  "each round; Stats.alpha_sum %.6f == the test's sum of sum_x min(p,q) %.6f; "
                  "stats_alpha %.6f == %.6f", dn, name, st.judged, w.judged, st.alpha_sum,
                  w.sum_beta, stats_alpha(&st), alpha);
            double sigma = sqrt(w.var_beta), dev = fabs(st.accepted - w.sum_beta);
            check(dev <= 4.5 * sigma + 1e-9, "acceptance, %s draft, %s: %ld accepted of %ld "
                  "judged positions vs sum of sum_x min(p,q) = %.1f (sd %.1f): %.2f sigma; rate "
                  "%.4f accepted/drafted", dn, name, st.accepted, w.judged, w.sum_beta, sigma,
                  sigma > 0 ? dev / sigma : 0.0,
                  st.drafted ? (double)st.accepted / st.drafted : 0.0);
            if (cases[ci].p_min > 0.0f)
                check(w.stopped > 0, "--draft-p-min %g, %s draft: %ld of %ld rounds stopped "
                      "drafting early (the cache and rows above cover them)", cases[ci].p_min,
                      dn, w.stopped, w.rounds);
        }
        free_gpt(&w.fresh);
        if (d->kind == DRAFT_GPT) free_gpt(&w.fresh_draft);
        free(w.toks);
        free(w.row);
        free(seq);
    }
    if (BUG == 0)
        check(all_folded > 0 && all_edge > 0, "the cache runs above watched %ld folded rounds "
              "(PASS_FOLDED) and %ld k = 0 rounds at the cache's last slot", all_folded,
              all_edge);
    free_spec_buffers(&b);
    broken_verdict(all_ok, "the rows or the cache of a round differ from plain decoding's");
}

// ----------------------------------------------------------------------------
// 6. test/explain: the numbers it prints for Nain's table

// explain_position's exact column must be p itself (the identity notes/math.md derives),
// with acceptance sum min(p, q) = 0.45; its measured column (200,000 real draft_tokens +
// accept_reject runs) must fit that by chi-square. explain.c was compiled before the
// mutants' #defines, so it runs the real phases in every build: this test runs in the
// correct build only (section 2's A/B/C/D case is the same measurement through the
// mutants, and fails in the broken builds).
static void test_explain(void) {
    if (BUG) return;
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
// 7. --selftest's sampling check can fail

// specdec.c's selftest_sampling enumerates one round of one guess on the trained model's
// real rows and returns the total variation against p; --selftest passes it accept_reject.
// Here it gets this file's accept_reject (the mutant, #defined above): in the correct build
// it must find the round exact (below 1e-9, the self-test's bound); in the builds that plant
// a bug in accept/reject (the residual drawn from p, the ratio swapped) it must not.
static void test_selftest_sampling(Fixture *fx) {
    if (!runs(CATCH_RESIDUAL | CATCH_RATIO)) return;
    int S = fx->model.config.block_size;
    double tv = selftest_sampling(&fx->model, &fx->draft, fx->corpus.tokens, S, accept_reject);
    int ok = case_check(tv < 1e-9, "--selftest's sampling check through this build's "
                        "accept_reject: total variation %.2g against p (below 1e-9)", tv);
    broken_verdict(ok, "--selftest's sampling check finds the planted bug");
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
    if (load_corpus(&fx.corpus, CORPUS_PATH, &fx.vocab, err, sizeof(err)) != 0) {
        check(0, "load %s (run 'make data'): %s", CORPUS_PATH, err);
        return 1;
    }
    Vocab mv;
    if (load_checkpoint(MODEL_PATH, &fx.model, &mv, err, sizeof(err)) != 0 ||
        mv.size != fx.vocab.size || memcmp(mv.chars, fx.vocab.chars, (size_t)mv.size) != 0) {
        check(0, "load the trained model %s with the corpus's vocabulary: %s", MODEL_PATH, err);
        return 1;
    }
    // the three drafts, as --draft builds them
    int S = fx.model.config.block_size;
    if (setup_draft("bigram", &fx.vocab, &fx.corpus, S, &fx.draft, err, sizeof(err)) != 0 ||
        setup_draft("gpt", &fx.vocab, &fx.corpus, S, &fx.gpt, err, sizeof(err)) != 0 ||
        setup_draft("lookup", &fx.vocab, &fx.corpus, S, &fx.lookup, err, sizeof(err)) != 0) {
        check(0, "build the bigram, gpt (%s) and lookup drafts: %s", DEFAULT_DRAFT, err);
        return 1;
    }
    (void)usage; (void)setup_model; (void)run_generation;
    t0 = now_seconds();
    test_chi_square(&fx);
    printf("(chi-square: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    test_round_faithful(&fx);
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
    test_explain();
    test_selftest_sampling(&fx);
    free_gpt(&fx.model);
    free_draft(&fx.draft);
    free_draft(&fx.gpt);
    free_draft(&fx.lookup);
    free_corpus(&fx.corpus);
    free(swap_p);
    free(swap_q);
    printf("test_exact summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}
