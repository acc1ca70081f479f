/*
 * test/round_copy.h: what the tests share to watch a generation round by round, and to
 * report on broken builds. Include it after specdec.c (or beyond.c) and check.h, with BUG
 * (0 in the correct build) and BUG_NAME defined.
 *
 * specdec.c and beyond.c carry no hook and no test-only code. A broken build plants its bug
 * as a one-line sed of specdec.c or beyond.c (the " * mutant" and " * mutant-beyond" header
 * lines, test/run_tests.sh), so every copy below, which calls the phases by name, runs the
 * mutated phases too. (A test may instead #define draft_tokens, verify_candidates,
 * accept_reject, trim_kv_cache or make_room to mutants of its own before including this
 * file: test_generate calls them by those names.)
 *
 *   test_generate       specdec.c's speculative_generate, copied line for line, with
 *                       hook(ctx, ...) after every round (hook may be NULL);
 *   test_tree_generate  beyond.c's tree_generate, copied, with a hook after every
 *                       tree_round (only when beyond.c is included).
 * A test that uses a copy must check, in its correct build, that the copy gives the real
 * loop's text, counters and caches (test_exact.c's section 3 does, for both).
 */

// What the round just run did, for the hook: the guesses it drafted (k), the cache's
// length before its verify pass (current_token's slot), whether a full cache was refilled
// first (make_room), and how many tokens it emitted (b->emitted).
typedef struct {
    int k, cache_len, refilled, num_accepted;
} CoreRound;

// Called by test_generate after every round, with the text so far (seq[n_seq-1] is the
// current token): the tests check the caches and the counters here.
typedef void (*RoundHook)(void *ctx, const GPT *g, const SpecBuffers *b, const CoreRound *r,
                          const int *seq, int n_seq);

// speculative_generate, copied: the same prefill, first token, refill and four phases, and
// hook(ctx, ...) after every round.
static void test_generate(GPT *target_model, const BigramDraft *draft_model, SpecBuffers *b,
                          const Tokens *prompt, const DecodeOptions *o, int *seq,
                          RoundHook hook, void *ctx) {
    int V = target_model->config.vocab_size, S = target_model->config.block_size;
    int K = o->K, max_new_tokens = o->max_new_tokens;
    float temperature = o->temperature;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    if (max_new_tokens == 0) {
        finish_stats(o->st, 0, t0);
        return;
    }
    const float *logits = prefill(target_model, seq, n_seq, S, o->st);
    int current_token = sample_token(logits, V, temperature, b->target_probs, o->rng);
    seq[n_seq] = current_token;
    if (o->trace) trace_prefill(o, target_model->state.cache_len, current_token, b->target_probs[current_token]);
    show_tokens(o, seq + n_seq, 1);
    n_seq++;
    while (n_seq - first < max_new_tokens && !output_failed(o)) {
        int refilled = target_model->state.cache_len == S;
        int room = make_room(target_model, seq, n_seq, o);
        int cache_len = target_model->state.cache_len;
        int remaining = max_new_tokens - (n_seq - first);
        int k = K < remaining ? K : remaining;
        if (k > room) k = room;
        int allow_bonus = k < remaining;
        double t_round = now_seconds();
        draft_tokens(draft_model, current_token, k, temperature, o->rng, b);
        verify_candidates(target_model, current_token, k, temperature, b);
        int num_accepted = accept_reject(b, k, allow_bonus, o->rng);
        trim_kv_cache(target_model, num_accepted, cache_len);
        report_round(o, b, k, num_accepted, cache_len, now_seconds() - t_round);
        memcpy(seq + n_seq, b->emitted, (size_t)num_accepted * sizeof(int));
        n_seq += num_accepted;
        current_token = seq[n_seq - 1];
        CoreRound r = {k, cache_len, refilled, num_accepted};
        if (hook) hook(ctx, target_model, b, &r, seq, n_seq);
    }
    finish_stats(o->st, n_seq - first, t0);
}

#ifdef TREE_MAX_DEPTH // beyond.c is included
// Called by test_tree_generate after every tree_round, which emitted n tokens (tb holds the
// round: its rows, p, q, path, restart), with the text so far.
typedef void (*TreeHook)(void *ctx, const GPT *g, const TreeBuffers *tb, int n, const int *seq,
                         int n_seq);

// tree_generate, copied: the same prefill, first token and loop of tree_round, with
// hook(ctx, ...) after every round (hook may be NULL).
static void test_tree_generate(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *prompt,
                               const RunOptions *o, int *seq, TreeHook hook, void *ctx) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, &o->st->core);
    tally_pass(o->st, PASS_PREFILL, g->state.cache_len, now_seconds() - t0);
    if (d && d->kind->restart) d->kind->restart(d, g, g->state.cache_len, 0);
    if (o->max_new_tokens > 0) {
        float *p = tb->p;
        served_probs(p, logits, V, &o->sampler);
        seq[n_seq] = sample_from(p, V, rng_uniform(o->rng));
        if (o->trace) trace_prefill(&(DecodeOptions){.vocab = o->vocab}, g->state.cache_len, seq[n_seq], p[seq[n_seq]]);
        show_colored(o, seq, n_seq, 1, FROM_TARGET);
        n_seq++;
    }
    while (n_seq - first < o->max_new_tokens && !(o->out && o->out->stream && ferror(o->out->stream))) {
        tb->limit = o->max_new_tokens - (n_seq - first);
        Tokens text = {seq, n_seq};
        int n = tree_round(g, d, tb, &text, o);
        memcpy(seq + n_seq, tb->emitted, (size_t)n * sizeof(int));
        show_colored(o, seq, n_seq, tb->passed, FROM_ACCEPTED);
        int drew = tb->n_children[tb->path[tb->passed]] > 0;
        TokenSource src = drew ? FROM_RESAMPLED : tb->rows > 1 ? FROM_BONUS : FROM_TARGET;
        if (n > tb->passed) show_colored(o, seq, n_seq + tb->passed, 1, src);
        n_seq += n;
        if (hook) hook(ctx, g, tb, n, seq, n_seq);
    }
    finish_stats(&o->st->core, n_seq - first, t0);
    o->st->tree = tb->shape.nodes > tb->shape.depth;
}
#endif

// Whether this build runs a test that can see the bugs in catches: the correct build
// runs everything; a broken build runs only the tests that must catch its bug.
static int runs(int catches) { return BUG == 0 || (catches & BUG) != 0; }

// One case of a test: a PASS/FAIL line in the correct build; in a broken build a
// commentary line (the test's verdict comes from broken_verdict). Returns ok.
static int case_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int case_check(int ok, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (BUG == 0) check(ok, "%s", msg);
    else printf("  case %s: %s\n", ok ? "holds" : "violated", msg);
    return ok;
}

// In a broken build: the test named what must have failed in at least one case.
static void broken_verdict(int all_ok, const char *what) {
    if (BUG == 0) return;
    check(!all_ok, "%s (-D%s): %s", all_ok ? "bug NOT caught" : "expected failure", BUG_NAME,
          what);
}
