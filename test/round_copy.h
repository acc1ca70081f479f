/*
 * test/round_copy.h: what test_exact.c and test_specdec.c share to plant bugs from the
 * test file, and to watch a generation round by round. Include it after the file has
 * #defined the phases it mutates (draft_tokens, accept_reject, trim_kv_cache, and any of
 * verify_candidates and restart_cache) to its own mutants, and defined BUG (0 in the
 * correct build) and BUG_NAME. specdec.c carries no test-only code and no hook: its
 * speculative_generate calls speculative_round by name. A test that must reach the loop
 * with a planted bug, or look at the caches after every round, runs test_generate, this
 * file's copy of speculative_generate, which calls ROUND: test_round (this copy of
 * speculative_round, routed through the mutants) in a broken build, speculative_round
 * itself in the correct one. The correct build checks that both copies, bug-free, give
 * speculative_generate's text, counters and caches.
 */

// speculative_round rebuilt from the phases as routed by the includer, with its
// bookkeeping (the restart, the room, the draft's lag, b->asked, b->drafted), then
// specdec.c's own count_round and trace_round: the round a broken build runs.
static int test_round(GPT *g, Draft *d, SpecBuffers *b, const Tokens *text, int remaining,
                      const DecodeOptions *o) {
    int S = g->config.block_size, k = o->K < remaining ? o->K : remaining;
    b->restarted = g->state.kv_len == S;
    b->lag = b->restarted ? restart_cache(g, d) : 0;
    int cache_len = b->cache_len = g->state.kv_len + b->lag;
    if (k > S - 1 - cache_len) k = S - 1 - cache_len;
    b->asked = k;
    GPT *draft_model = d->kind == DRAFT_GPT ? &d->model : NULL;
    b->draft_lag = draft_model ? cache_len - draft_model->state.kv_len : 0;
    double t0 = now_seconds();
    k = draft_tokens(d, text, k, &o->sampler, o->rng, b);
    b->drafted = k;
    double t1 = now_seconds();
    verify_candidates(g, text, k, &o->sampler, b);
    double t2 = now_seconds();
    int allow_bonus = k < remaining;
    int n = accept_reject(b, k, allow_bonus, o->rng);
    trim_kv_cache(g, draft_model, n, cache_len);
    count_round(o->st, d, b, n, t1 - t0, t2 - t1);
    if (o->trace) trace_round(o, d, b, n, g->state.kv_len);
    return n;
}

// The round test_generate runs: the mutants' copy in a broken build, the real one otherwise.
typedef int (*RoundFn)(GPT *g, Draft *d, SpecBuffers *b, const Tokens *text, int remaining,
                       const DecodeOptions *o);
#define ROUND (BUG ? test_round : speculative_round)

// Called by test_generate after every round, with the text so far (seq[n_seq-1] is the
// current token): the tests check the caches and the counters here.
typedef void (*RoundHook)(void *ctx, const GPT *g, const int *seq, int n_seq);

// speculative_generate, copied: the same prefill, first token and loop, with `round` in
// place of speculative_round and hook(ctx, ...) after every round (hook may be NULL).
static void test_generate(GPT *g, Draft *d, SpecBuffers *b, const Tokens *prompt,
                          const DecodeOptions *o, int *seq, RoundFn round, RoundHook hook,
                          void *ctx) {
    int V = g->config.vocab_size, S = g->config.block_size, n_new = o->n_new;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, PASS_PREFILL, o->st);
    restart_draft_cache(d);
    if (n_new > 0) {
        seq[n_seq] = sample_served(logits, V, &o->sampler, b->p_next, o->rng);
        if (o->trace) trace_prefill(o, g->state.kv_len, seq[n_seq]);
        show_round(o, NULL, seq, n_seq, 1);
        n_seq++;
    }
    while (n_seq - first < n_new && !output_failed(o)) {
        int remaining = n_new - (n_seq - first);
        int n = round(g, d, b, &(Tokens){seq, n_seq}, remaining, o);
        memcpy(seq + n_seq, b->accepted, (size_t)n * sizeof(int));
        show_round(o, b, seq, n_seq, n);
        n_seq += n;
        if (hook) hook(ctx, g, seq, n_seq);
    }
    finish_stats(o->st, n_seq - first, t0);
}

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
