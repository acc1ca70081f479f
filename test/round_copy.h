/*
 * test/round_copy.h: what test_exact.c and test_specdec.c share to plant bugs from the
 * test file. Include it after the file has #defined draft_tokens, accept_reject and
 * trim_kv_cache to its own mutants, and defined BUG (0 in the correct build) and
 * BUG_NAME. specdec.c carries no test-only code: a broken build runs test_round, this
 * copy of speculative_round routed through the mutants, and the correct build checks
 * that the copy, bug-free, gives speculative_round's text and counters.
 */

// speculative_round (a RoundFn) rebuilt from the phases as routed by the includer, with
// its bookkeeping (the draft's lag, time and passes, b->drafted), then specdec.c's own
// count_round and trace: the round speculative_generate runs in a broken build.
static int test_round(GPT *g, Draft *d, SpecBuffers *b, const int *seq, int n_seq, int k,
                      int remaining, const DecodeOptions *o, Rng *rng, Stats *st) {
    int V = g->config.vocab_size, current_token = seq[n_seq - 1];
    int cache_len = g->state.kv_len;
    GPT *draft_model = d->kind == DRAFT_GPT ? &d->model : NULL;
    b->draft_lag = draft_model ? cache_len - draft_model->state.kv_len : 0;
    double t0 = now_seconds();
    k = draft_tokens(d, seq, n_seq, cache_len, k, &o->sampler, rng, b->candidates,
                     b->q_draft);
    b->drafted = k;
    double t1 = now_seconds();
    verify_candidates(g, current_token, b->candidates, k, &o->sampler, b->all_tokens,
                      b->p_target);
    double t2 = now_seconds();
    int allow_bonus = k < remaining;
    int n = accept_reject(b->candidates, k, b->q_draft, b->p_target, V, allow_bonus, rng,
                          b->u, b->residual, b->accepted, &b->rejected_at);
    trim_kv_cache(g, draft_model, n, cache_len);
    st->draft_seconds += t1 - t0;
    st->verify_seconds += t2 - t1;
    if (draft_model) st->draft_passes += k;
    count_round(st, b, k, n);
    if (o->trace)
        trace_round(o, d, st->rounds, current_token, k, b, n, cache_len, g->state.kv_len);
    return n;
}

// The round speculative_generate runs here: NULL (speculative_round) in the correct build.
#define ROUND (BUG ? test_round : NULL)

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
