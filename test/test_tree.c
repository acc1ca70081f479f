/*
 * test/test_tree.c: the tree of guesses (beyond.c, "A tree of guesses, verified in one pass"),
 * proved exact with checks that can fail.
 *
 *   1. The node rule, enumerated exactly on the trained model's real (p, q) rows: every
 *      ordered set of children the draft can draw without replacement, each with its exact
 *      chance, through beyond.c's own start_node, child_chance and reject_child; the
 *      output distribution must be p (total variation < 1e-9) at t = 0.5, 1 and 1.5, with
 *      top-k and top-p (rows with zeros), for the bigram and the GPT draft, 2 and 3
 *      children, and for the greedy tree's sure children (Q one-hot). The negative control,
 *      the same children judged by p/q with Q never updated (the common shortcut), must
 *      miss p by far.
 *   2. One masked tree pass == a causal pass over each root-to-node path, bit for bit, for
 *      random parent arrays on top of a cache; and a chain's mask gives forward's logits.
 *   3. After every tree round (compaction), the target's cache and the draft's equal a
 *      recompute of the accepted text, bit for bit: the GPT draft's, and the cascade's (its
 *      trunk from inner rounds, the levels below from masked passes).
 *   4. Greedy equivalence: a tree at t = 0 gives plain greedy decoding's text, byte for
 *      byte, for a sweep of shapes and both model-free and model drafts, the cascade too.
 *   5. Chi-square, end to end: the first two tokens of tree decoding (t = 1) against their
 *      exact distribution from the target.
 *   6. Medusa's row: after every tree round at t = 0, the hidden row its heads will read
 *      next (the draft's hidden, which its keep sets) is the one whose p gave the round's last token: lm_head on it has
 *      that token as its argmax. Greedy equivalence (4) cannot see a wrong row: the text is
 *      exact whatever the heads guess.
 *
 *   7. Filters in a tree: with top-k and top-p on, the first two tokens of tree decoding
 *      (chi-square, as 5) follow the served rows, and every token a tree emits, over whole
 *      texts, has p > 0 in its served row (cut). A negative control, the same counts against
 *      the uncut target row, must fail the chi-square.
 *   8. Speed floors: a tree's alpha and tokens per verify pass (3,2,1,1, t = 1, bigram and
 *      gpt drafts, a fixed seed) stay above 85% of the values measured on the shipped model.
 *      The rule is exact whatever q is, so a draft that builds its rows wrongly is only slow,
 *      and only a floor sees it.
 *   9. Greedy trees draft as trees: at t = 0 (sure children, tb->top) a 3,2,1,1 tree has 21
 *      guesses whenever the window has room for them, and fills the room the window leaves.
 *
 * Broken builds: each compiles a copy of beyond.c with one line changed (the "mutant-beyond"
 * line: a sed edit that test/run_tests.sh applies, and checks it changed exactly one line),
 * and passes only if the check that must see the bug fails. A broken build runs only the
 * sections whose checks must catch its bug.
 * broken build: -DBREAK_TREE_Q
 * mutant-beyond BREAK_TREE_Q: s|^    if (!tb->top) remove_token(tb->Q_work, tb->token\[c\], tb->V);$|    ;|
 * broken build: -DBREAK_TREE_MASK
 * mutant-beyond BREAK_TREE_MASK: s|^        for (int a = r; a > 0; a = tb->parent\[a\]) row\[root + a\] = 1;|        for (int a = r; a > 0; a--) row[root + a] = 1;|
 * broken build: -DBREAK_TREE_COMPACT
 * mutant-beyond BREAK_TREE_COMPACT: s|move_cache_row(g, tb->cache_len + tb->path\[d\], tb->cache_len + d)|move_cache_row(g, tb->cache_len + d, tb->cache_len + d)|
 * broken build: -DBREAK_TREE_LAST
 * mutant-beyond BREAK_TREE_LAST: s|^    compact_kv_cache(g, tb, n - 1); // 4\.|    compact_kv_cache(g, tb, tb->passed); // 4.|
 * broken build: -DBREAK_TREE_HIDDEN
 * mutant-beyond BREAK_TREE_HIDDEN: s|(size_t)(tb->rerun + tb->path\[tb->passed\]) \* C;|(size_t)(tb->rerun) * C;|
 * broken build: -DBREAK_TREE_FILTER
 * mutant-beyond BREAK_TREE_FILTER: s|^        served_probs(tb->p + (size_t)r \* V, logits + (size_t)(rerun + r) \* V, V, s);|        tempered_softmax(tb->p + (size_t)r * V, logits + (size_t)(rerun + r) * V, V, s->temperature);|
 * broken build: -DBREAK_TREE_DRAFT_TOKEN
 * mutant-beyond BREAK_TREE_DRAFT_TOKEN: s|bigram_served_probs(q, &d->bigram, tb->token\[r\], s);|bigram_served_probs(q, \&d->bigram, tb->token[r > 0 ? tb->parent[r] : 0], s);|
 * broken build: -DBREAK_TREE_DRAFT_INPUT
 * mutant-beyond BREAK_TREE_DRAFT_INPUT: s|tree_forward(&d->model, tb->token + lo, hi - lo,|tree_forward(\&d->model, tb->token + tb->parent[lo], hi - lo,|
 * broken build: -DBREAK_TREE_GREEDY_WIDTH
 * mutant-beyond BREAK_TREE_GREEDY_WIDTH: s|^    for (int i = 0; i < want && tb->rows < room; i++) {|    for (int i = 0; i < (tb->top ? 1 : want) \&\& tb->rows < room; i++) {|
 * broken build: -DBREAK_TREE_CASCADE_CATCHUP
 * broken build: -DBREAK_TREE_PREFILL_ROW
 * mutant-beyond BREAK_TREE_PREFILL_ROW: s|g->state.ln_f + (size_t)(prefilled - 1) \* C|g->state.ln_f + (size_t)(prefilled - 2) * C|
 * mutant-beyond BREAK_TREE_CASCADE_CATCHUP: s|^        Tokens in = {text->tok + text->n - 1 - lag, lag + 1}; |        Tokens in = {text->tok + text->n - 1, 1}; |
 *   BREAK_TREE_Q        Q stays q after a rejected child (siblings drawn without replacement
 *                       but judged as if drawn with it): the enumeration (1) and the
 *                       chi-square (5) must fail.
 *   BREAK_TREE_MASK     every row of the pass sees every earlier row, siblings too: the
 *                       masked pass (2) must fail.
 *   BREAK_TREE_COMPACT  the rows kept after a round are the first ones, not the path's: the
 *                       cache check (3) must fail.
 *   BREAK_TREE_LAST     a last round that passes to the tokens wanted (no bonus) keeps every
 *                       guess that passed, its last token too: the cache check (3) must fail.
 *   BREAK_TREE_HIDDEN   Medusa reads current_token's row, not the row of the node whose p
 *                       gave the last token: the row check (6) must fail.
 *   BREAK_TREE_FILTER   the tree's target rows skip top-k and top-p (verify_tree's p is the
 *                       tempered softmax alone): both filter checks (7) must fail.
 *   BREAK_TREE_DRAFT_TOKEN  the bigram drafts a node's children from its parent's token's
 *                       row: exact but slow; the bigram's speed floor (8) must fail.
 *   BREAK_TREE_DRAFT_INPUT  the model draft's pass over a level reads the parents' tokens,
 *                       not the level's (and keeps those rows in its cache): exact but slow;
 *                       the gpt draft's speed floor (8) must fail.
 *   BREAK_TREE_GREEDY_WIDTH  at t = 0 each node gets one child whatever the shape asks: a
 *                       greedy tree is a chain of 4; the width check (9) must fail.
 *   BREAK_TREE_PREFILL_ROW  after the prefill Medusa reads the row before the last: the
 *                       first round's heads guess from the wrong position; the row check (6)
 *                       must fail.
 *   BREAK_TREE_CASCADE_CATCHUP  the cascade's first inner pass leaves out the tokens its
 *                       cache lags (the last round's bonus): current_token lands in the slot
 *                       of the first of them, and the tokens never run: the cache check (3)
 *                       must fail.
 */
#define TESTING
#ifndef BEYOND_C
#define BEYOND_C "../beyond.c" // a mutant build includes an edited copy instead
#endif
#include BEYOND_C

#include "check.h"

#define CORPUS_PATH "tinyshakespeare/input.txt"
#define MODEL_PATH "tinyshakespeare/model.bin"

#if defined(BREAK_TREE_Q)
#define BUG "BREAK_TREE_Q"
#elif defined(BREAK_TREE_MASK)
#define BUG "BREAK_TREE_MASK"
#elif defined(BREAK_TREE_COMPACT)
#define BUG "BREAK_TREE_COMPACT"
#elif defined(BREAK_TREE_LAST)
#define BUG "BREAK_TREE_LAST"
#elif defined(BREAK_TREE_HIDDEN)
#define BUG "BREAK_TREE_HIDDEN"
#elif defined(BREAK_TREE_FILTER)
#define BUG "BREAK_TREE_FILTER"
#elif defined(BREAK_TREE_DRAFT_TOKEN)
#define BUG "BREAK_TREE_DRAFT_TOKEN"
#elif defined(BREAK_TREE_DRAFT_INPUT)
#define BUG "BREAK_TREE_DRAFT_INPUT"
#elif defined(BREAK_TREE_GREEDY_WIDTH)
#define BUG "BREAK_TREE_GREEDY_WIDTH"
#elif defined(BREAK_TREE_PREFILL_ROW)
#define BUG "BREAK_TREE_PREFILL_ROW"
#elif defined(BREAK_TREE_CASCADE_CATCHUP)
#define BUG "BREAK_TREE_CASCADE_CATCHUP"
#else
#define BUG ""
#endif

#include "broken.h" // expect, runs: the checks a broken build must fail

typedef struct {
    Corpus corpus;
    Vocab vocab;
    GPT model;
    Draft bigram, gpt, medusa, cascade;
} Fixture;

// The total variation between two rows: half the sum of |a - b|.
static double total_variation(const double *a, const double *b, int V) {
    double tv = 0.0;
    for (int x = 0; x < V; x++) tv += fabs(a[x] - b[x]);
    return tv / 2.0;
}

// ----------------------------------------------------------------------------
// 1. The node rule, enumerated

// Adds to out the output distribution of one node whose W children are `kids` (in order),
// reached with chance `reach`, through beyond.c's steps; `shortcut` judges every child
// against q and the running p without ever changing Q (the negative control).
static void node_outcome(TreeBuffers *tb, const int *kids, int W, double reach, int shortcut,
                         double *out) {
    int V = tb->V;
    tb->rows = 1 + W;
    tb->first_child[0] = 1;
    tb->n_children[0] = W;
    for (int i = 0; i < W; i++) tb->token[1 + i] = kids[i];
    start_node(tb, 0);
    for (int i = 0; i < W; i++) {
        double a = child_chance(tb, 1 + i);
        out[kids[i]] += reach * a;
        reach *= 1.0 - a;
        if (shortcut) { // p := norm(max(p - q, 0)), Q left as the node's q
            subtract_and_normalise(tb->p_work, tb->Q_work, V);
            continue;
        }
        reject_child(tb, 1 + i);
    }
    double mass = 0.0; // the leftover draw: sample_double scales by the row's total
    for (int x = 0; x < V; x++) mass += tb->p_work[x];
    for (int x = 0; x < V; x++) out[x] += reach * tb->p_work[x] / mass;
}

// Every ordered draw of W distinct children from q (without replacement), with its chance;
// depth-first over the positions. kids[0 .. i-1] are drawn, with chance `chance`.
static void enumerate_draws(TreeBuffers *tb, const double *q, int *kids, int i, int W,
                            double chance, int shortcut, double *out) {
    int V = tb->V;
    double left = 0.0; // the mass of the tokens not drawn yet
    for (int x = 0; x < V; x++) {
        int used = 0;
        for (int j = 0; j < i; j++) used |= kids[j] == x;
        if (!used) left += q[x];
    }
    if (i == W || left <= 0.0) { // all W drawn, or q has no more tokens: the node is set
        node_outcome(tb, kids, i, chance, shortcut, out);
        return;
    }
    for (int x = 0; x < V; x++) {
        int used = 0;
        for (int j = 0; j < i; j++) used |= kids[j] == x;
        if (used || q[x] <= 0.0) continue;
        kids[i] = x;
        enumerate_draws(tb, q, kids, i + 1, W, chance * q[x] / left, shortcut, out);
    }
}

// The exact output distribution of one node with W children, against p: the TV.
static double node_tv(TreeBuffers *tb, const float *p, const float *q, int W, int shortcut) {
    int V = tb->V, kids[8];
    double pd[256], qd[256], out[256] = {0}, ps = 0.0, qs = 0.0;
    memcpy(tb->p, p, (size_t)V * sizeof(float)); // row 0: the node's p and q
    memcpy(tb->q, q, (size_t)V * sizeof(float));
    for (int x = 0; x < V; x++) {
        ps += p[x];
        qs += q[x];
    }
    for (int x = 0; x < V; x++) {
        pd[x] = p[x] / ps;
        qd[x] = q[x] / qs;
    }
    if (tb->top) { // sure children: the top W of q, in order
        float left[256];
        memcpy(left, q, (size_t)V * sizeof(float));
        for (int i = 0; i < W; i++) {
            kids[i] = argmax(left, V);
            left[kids[i]] = -1.0f;
        }
        node_outcome(tb, kids, W, 1.0, shortcut, out);
    } else {
        enumerate_draws(tb, qd, kids, 0, W, 1.0, shortcut, out);
    }
    return total_variation(out, pd, V);
}

// The real rows of one context: the target's served p, the bigram's and the GPT draft's q.
static void real_rows(Fixture *fx, const int *ctx, int n, const Sampler *s, float *p,
                      float *q_bigram, float *q_gpt) {
    int V = fx->vocab.size;
    fx->model.state.cache_len = 0;
    served_probs(p, forward(&fx->model, ctx, n) + (size_t)(n - 1) * V, V, s);
    bigram_served_probs(q_bigram, &fx->bigram.bigram, ctx[n - 1], s);
    fx->gpt.model.state.cache_len = 0;
    served_probs(q_gpt, forward(&fx->gpt.model, ctx, n) + (size_t)(n - 1) * V, V, s);
}

static void test_enumeration(Fixture *fx) {
    int V = fx->vocab.size;
    TreeShape shape = {1, {3}, 3};
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, 32);
    const Sampler samplers[] = {{0.5f, 0, 0.0f}, {1.0f, 0, 0.0f}, {1.5f, 0, 0.0f},
                                {1.0f, 5, 0.0f}, {1.0f, 0, 0.9f}, {0.8f, 8, 0.95f}};
    const char *names[] = {"t=0.5", "t=1", "t=1.5", "t=1 top-k 5", "t=1 top-p 0.9",
                           "t=0.8 top-k 8 top-p 0.95"};
    float p[256], qb[256], qg[256];
    double worst = 0.0, worst_short = 0.0;
    int cases = 0;
    for (int c = 0; c < 2; c++) { // two contexts from the validation text
        const int *ctx = fx->corpus.tokens + fx->corpus.n_train + 1000 + 517 * c;
        for (int si = 0; si < 6; si++) {
            real_rows(fx, ctx, 16, &samplers[si], p, qb, qg);
            // three children where the row is cut to a few tokens (2,000 draws at most),
            // two elsewhere (4,160 draws of 65 tokens)
            for (int W = 2; W <= (samplers[si].top_k ? 3 : 2); W++)
                for (int dq = 0; dq < 2; dq++) {
                    const float *q = dq ? qg : qb;
                    tb.top = 0;
                    double tv = node_tv(&tb, p, q, W, 0);
                    double tv_short = node_tv(&tb, p, q, W, 1);
                    tb.top = 1; // sure children, the same rows
                    double tv_sure = node_tv(&tb, p, q, W, 0);
                    worst = fmax(worst, fmax(tv, tv_sure));
                    worst_short = fmax(worst_short, tv_short);
                    cases++;
                    if (tv >= 1e-9 || tv_sure >= 1e-9)
                        printf("  context %d, %s, %s draft, %d children: TV %.2g, sure children "
                               "TV %.2g\n", c, names[si], dq ? "gpt" : "bigram", W, tv, tv_sure);
                }
        }
    }
    char what[300];
    snprintf(what, sizeof(what), "tree node rule, enumerated over every draw of 2 and 3 children "
             "without replacement (and sure children) on real rows, %d cases (t 0.5/1/1.5, "
             "top-k, top-p; bigram and gpt q): worst total variation %.2g against p (< 1e-9)",
             cases, worst);
    expect("BREAK_TREE_Q", worst < 1e-9, what);
    snprintf(what, sizeof(what), "negative control: the same children judged by p/q with Q "
             "never updated miss p, by a total variation of up to %.3g (must be > 1e-3)",
             worst_short);
    expect(NULL, worst_short > 1e-3, what);
    free_tree_buffers(&tb);
}

// ----------------------------------------------------------------------------
// 2. The masked pass

static void test_masked_pass(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    Rng r;
    rng_seed(&r, 2024);
    TreeShape shape = {1, {S - 1}, S - 1}; // room for any tree of up to S-1 guesses
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, S);
    long rows = 0, differ = 0;
    for (int trial = 0; trial < (SANITIZED ? 4 : 40); trial++) {
        int cache = (int)(rng_u64(&r) % 12); // tokens already in the cache
        int nodes = 1 + (int)(rng_u64(&r) % (S - cache - 1)); // the pass: current + nodes
        const int *text = fx->corpus.tokens + 3000 + 97 * trial;
        int path[64];
        // a random tree in beyond.c's row order: row 0 is current_token (at slot `cache`,
        // after the cache), each later row's parent an earlier row
        tb.cache_len = cache;
        tb.rows = nodes + 1;
        for (int i = 0; i <= nodes; i++) tb.token[i] = text[cache + (int)(rng_u64(&r) % 8)];
        tb.parent[0] = -1;
        tb.depth[0] = 0;
        for (int i = 1; i <= nodes; i++) {
            tb.parent[i] = (int)(rng_u64(&r) % i);
            tb.depth[i] = tb.depth[tb.parent[i]] + 1;
        }
        g->state.cache_len = 0;
        if (cache > 0) forward(g, text, cache);
        mask_rows(&tb, 0, tb.rows, 0, S, cache); // beyond.c's mask and positions, as verify_tree's
        float logits[64 * 65];
        memcpy(logits, tree_forward(g, tb.token, tb.rows, tb.positions, tb.sees),
               (size_t)(nodes + 1) * V * sizeof(float));
        for (int i = 0; i <= nodes; i++) { // the causal pass over node i's path
            int n = 0;
            for (int a = i; a >= 0; a = tb.parent[a]) path[n++] = tb.token[a];
            int seq[64];
            memcpy(seq, text, (size_t)cache * sizeof(int));
            for (int j = 0; j < n; j++) seq[cache + j] = path[n - 1 - j];
            g->state.cache_len = 0;
            const float *want = forward(g, seq, cache + n) + (size_t)(cache + n - 1) * V;
            differ += memcmp(want, logits + (size_t)i * V, (size_t)V * sizeof(float)) != 0;
            rows++;
        }
    }
    char what[200];
    snprintf(what, sizeof(what), "one masked tree pass == a causal pass over each root-to-node "
             "path, bit for bit: %ld of %ld rows differ (random parent arrays)", differ, rows);
    expect("BREAK_TREE_MASK", differ == 0 && rows > 0, what);
    free_tree_buffers(&tb);
}

// A chain's mask (causal_rows: each token sees every slot up to its own) makes tree_forward
// forward itself: the same logits, bit for bit, for passes of 2, 9 and S tokens from slot 0.
// The one loop's chains and restarts rest on it. (./beyond --selftest checked this on its
// own model until the check moved here.)
static void test_chain_mask(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size, sizes[3] = {2, 9, S}, differ = 0;
    const int *tokens = fx->corpus.tokens + 5000;
    float *causal = malloc((size_t)S * V * sizeof(float));
    TreeBuffers chain = {.positions = malloc((size_t)S * sizeof(int)), .sees = malloc((size_t)S * S)};
    for (int i = 0; i < 3 && causal && chain.positions && chain.sees; i++) {
        int T = sizes[i];
        g->state.cache_len = 0;
        memcpy(causal, forward(g, tokens, T), (size_t)T * V * sizeof(float));
        causal_rows(&chain, T, 0, S);
        g->state.cache_len = 0;
        differ += memcmp(causal, tree_forward(g, tokens, T, chain.positions, chain.sees),
                         (size_t)T * V * sizeof(float)) != 0;
    }
    char what[160];
    snprintf(what, sizeof(what), "tree_forward with a chain's mask == forward, bit for bit, "
             "passes of 2, 9 and %d tokens: %d of 3 differ", S, differ);
    expect(NULL, causal && chain.positions && chain.sees && differ == 0, what);
    free(causal);
    free(chain.positions);
    free(chain.sees);
}

// ----------------------------------------------------------------------------
// 3 and 4. Rounds: the caches after compaction, and greedy equivalence

// Compares slots 0 .. kv_len-1 of a model's cache with a fresh pass over the tokens they
// hold, the window's first kv_len from seq[start]; 1 if equal, bit for bit.
static int cache_is_recompute(GPT *m, GPT *fresh, const int *seq, int start) {
    int kv = m->state.cache_len, C = m->config.n_embd, S = m->config.block_size;
    if (kv == 0) return 1;
    fresh->state.cache_len = 0;
    forward(fresh, seq + start, kv);
    for (int l = 0; l < m->config.n_layer; l++) {
        size_t off = (size_t)l * S * C, n = (size_t)kv * C * sizeof(float);
        if (memcmp(m->state.key_cache + off, fresh->state.key_cache + off, n) ||
            memcmp(m->state.value_cache + off, fresh->state.value_cache + off, n))
            return 0;
    }
    return 1;
}

// Runs tree rounds with draft d (the gpt draft, or the cascade, whose model is the same), and
// after each compares both caches with a recompute; `catches`: the broken builds it must see.
static void cache_after_rounds(Fixture *fx, Draft *d, const char *catches) {
    GPT *g = &fx->model, fresh, fresh_draft;
    int V = fx->vocab.size, S = g->config.block_size;
    build_gpt(&fresh, &g->config);
    memcpy(fresh.params, g->params, g->n_params * sizeof(float));
    build_gpt(&fresh_draft, &d->model.config);
    memcpy(fresh_draft.params, d->model.params, d->model.n_params * sizeof(float));
    TreeShape shape = {4, {3, 2, 1, 1}, 21};
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, S);
    RunStats st = {0};
    Rng rng;
    rng_seed(&rng, 7);
    RunOptions o = {.sampler = {1.0f, 0, 0.0f}, .vocab = &fx->vocab, .rng = &rng, .st = &st};
    int seq[600], n_seq = 20, rounds = 0, bad = 0, bad_draft = 0, moved = 0, lasts = 0;
    memcpy(seq, fx->corpus.tokens + 9000, (size_t)n_seq * sizeof(int));
    g->state.cache_len = 0;
    forward(g, seq, n_seq - 1); // the cache holds every token before current_token
    d->model.state.cache_len = 0;
    while (n_seq < (SANITIZED ? 80 : 400)) {
        // tokens still wanted: 1 to 5 in turn, so that some rounds are a generation's last,
        // where a path that passes to the limit gets no bonus and its last token is not cached
        tb.limit = 1 + rounds % 5;
        int n = tree_round(g, d, &tb, &(Tokens){seq, n_seq}, &o);
        moved += tb.passed > 0 && tb.path[tb.passed] != tb.passed; // a path off the first rows
        lasts += n == tb.passed; // a last round: every token wanted passed, no bonus
        memcpy(seq + n_seq, tb.emitted, (size_t)n * sizeof(int));
        n_seq += n;
        rounds++;
        int start = n_seq - 1 - g->state.cache_len; // the window: the target holds all before current
        bad += !cache_is_recompute(g, &fresh, seq, start);
        bad_draft += d->model.state.cache_len > g->state.cache_len || // a prefix of it, at most
                     !cache_is_recompute(&d->model, &fresh_draft, seq, start);
    }
    char what[300];
    snprintf(what, sizeof(what), "after each of %d tree rounds (3,2,1,1, %s draft, t = 1; %d "
             "kept a path off the first rows, %d ended at the tokens wanted with no bonus), the "
             "target's cache equals a recompute of the text in %d and the draft's in %d", rounds,
             d->name, moved, lasts, rounds - bad, rounds - bad_draft);
    expect(catches, bad == 0 && bad_draft == 0 && moved > 0 && lasts > 0, what);
    free_tree_buffers(&tb);
    free_gpt(&fresh);
    free_gpt(&fresh_draft);
}

// Both compaction bugs must fail the check, with either draft: the wrong rows kept, or one
// row too many; the cascade's also with its chain row put back in the wrong slot.
static void test_cache_after_rounds(Fixture *fx) {
    if (runs("BREAK_TREE_COMPACT BREAK_TREE_LAST"))
        cache_after_rounds(fx, &fx->gpt, "BREAK_TREE_COMPACT BREAK_TREE_LAST");
    cache_after_rounds(fx, &fx->cascade, "BREAK_TREE_COMPACT BREAK_TREE_LAST "
                       "BREAK_TREE_CASCADE_CATCHUP");
}

static void test_greedy(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    const char *shapes[] = {"1", "2", "3,2,1,1", "2,2,2,2", "1,1,1,1,1,1,1,1", "4,1,1", "6",
                            "2,1,2,1,2", "5,5"};
    Draft *drafts[4] = {&fx->bigram, &fx->gpt, &fx->medusa, &fx->cascade};
    int max_new_tokens = SANITIZED ? 40 : 300, cases = 0, same = 0;
    int *want = malloc(sizeof(int) * (64 + max_new_tokens)), *got = malloc(sizeof(int) * (64 + max_new_tokens));
    float p[256];
    DecodeOptions o = {.max_new_tokens = max_new_tokens, .temperature = 0.0f, .K = 4, .vocab = &fx->vocab};
    RunOptions ro = {.max_new_tokens = max_new_tokens, .sampler = {0.0f, 0, 0.0f}, .vocab = &fx->vocab};
    for (int pi = 0; pi < 2; pi++) {
        const int *prompt = fx->corpus.tokens + fx->corpus.n_train + 200 + 4000 * pi;
        int n_prompt = pi ? 3 : 40; // a short prompt, and one longer than the window
        Stats st = {0};
        Rng rng;
        rng_seed(&rng, 1);
        o.rng = &rng;
        o.st = &st;
        generate(g, &(Tokens){prompt, n_prompt}, &o, want, p);
        for (size_t si = 0; si < sizeof(shapes) / sizeof(shapes[0]); si++)
            for (int di = 0; di < 4; di++) {
                TreeShape shape;
                char err[200];
                if (parse_tree_shape(shapes[si], V, S, &shape, err, sizeof(err)) != 0) continue;
                if (di == 2 && shape.depth > fx->medusa.medusa.n_heads) continue; // 4 heads
                TreeBuffers tb;
                build_tree_buffers(&tb, &shape, V, S);
                tb.top = 1;
                RunStats ts = {0};
                rng_seed(&rng, 99 + si);
                ro.rng = &rng;
                ro.st = &ts;
                tree_generate(g, drafts[di], &tb, &(Tokens){prompt, n_prompt}, &ro, got);
                int n = n_prompt + max_new_tokens;
                int ok = memcmp(want, got, (size_t)n * sizeof(int)) == 0;
                if (!ok) printf("  differs: shape %s, draft %s, prompt %d\n", shapes[si],
                                drafts[di]->name, pi);
                same += ok;
                cases++;
                free_tree_buffers(&tb);
            }
    }
    char what[200];
    snprintf(what, sizeof(what), "greedy trees give plain greedy decoding's text, byte for "
             "byte: %d of %d (9 shapes x bigram, gpt and cascade, 7 of them x Medusa's heads, "
             "x 2 prompts, %d tokens)", same, cases, max_new_tokens);
    expect(NULL, same == cases && cases == 68, what);
    free(want);
    free(got);
}

// ----------------------------------------------------------------------------
// 6. The hidden row Medusa's heads read

static void test_medusa_row(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size, C = g->config.n_embd;
    TreeShape shape = {4, {3, 2, 1, 1}, 21};
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, S);
    tb.top = 1;
    RunStats st = {0};
    Rng rng;
    rng_seed(&rng, 5);
    RunOptions o = {.sampler = {0.0f, 0, 0.0f}, .vocab = &fx->vocab, .rng = &rng, .st = &st};
    int seq[600], n_seq = 20, rounds = 0, right = 0, longer = 0;
    memcpy(seq, fx->corpus.tokens + 20000, (size_t)n_seq * sizeof(int));
    g->state.cache_len = 0;
    const float *last = forward(g, seq, n_seq - 1) + (size_t)(n_seq - 2) * V; // the prefill's
    int first = argmax(last, V); // greedy: the token the prefill's last row gives
    Draft *medusa = &fx->medusa;
    medusa->kind->restart(medusa, g, n_seq - 1, 0); // the prefill's last row, as tree_generate
    float head_row[256];
    matmul(head_row, medusa->hidden, (Linear){g->w.lm_head_weight, g->w.lm_head_bias, C, V}, 1);
    int prefill_right = argmax(head_row, V) == first; // the first round reads that row
    while (n_seq < (SANITIZED ? 80 : 400)) {
        tb.limit = 1000;
        int n = tree_round(g, &fx->medusa, &tb, &(Tokens){seq, n_seq}, &o);
        memcpy(seq + n_seq, tb.emitted, (size_t)n * sizeof(int));
        n_seq += n;
        float logits[256];
        matmul(logits, medusa->hidden, (Linear){g->w.lm_head_weight, g->w.lm_head_bias, C, V}, 1);
        right += argmax(logits, V) == seq[n_seq - 1]; // t = 0: the row's argmax was emitted
        longer += n > 1; // rounds where current_token's own row would be the wrong one
        rounds++;
    }
    char what[300];
    snprintf(what, sizeof(what), "Medusa's heads read the row whose p gave each round's last "
             "token: lm_head on the draft's hidden gives that token in %d of %d greedy rounds (3,2,1,1; "
             "%d emitted more than one token)", right, rounds, longer);
    expect("BREAK_TREE_HIDDEN", right == rounds && longer > 0, what);
    snprintf(what, sizeof(what), "after the prefill, Medusa's heads read the prefill's last row "
             "(the one the first token comes from): lm_head on it gives that token: %s",
             prefill_right ? "yes" : "NO");
    expect("BREAK_TREE_PREFILL_ROW", prefill_right, what);
    free_tree_buffers(&tb);
}

// ----------------------------------------------------------------------------
// 5. Chi-square, end to end

// The chi-square statistic of counts against expected counts, cells below 5 pooled; *df
// receives the degrees of freedom.
static double chi_square(const long *counts, const double *expected, int n, int *df) {
    double chi = 0.0, pool_e = 0.0, pool_c = 0.0;
    int cells = 0;
    for (int i = 0; i < n; i++) {
        if (expected[i] < 5.0) {
            pool_e += expected[i];
            pool_c += counts[i];
            continue;
        }
        chi += (counts[i] - expected[i]) * (counts[i] - expected[i]) / expected[i];
        cells++;
    }
    if (pool_e > 0.0) {
        chi += (pool_c - pool_e) * (pool_c - pool_e) / pool_e;
        cells++;
    }
    *df = cells - 1;
    return chi;
}

// The 0.999 quantile of chi-square with df degrees of freedom (Wilson-Hilferty).
static double chi_limit(int df) {
    double z = 3.09, h = 2.0 / (9.0 * df);
    return df * pow(1.0 - h + z * sqrt(h), 3.0);
}

static void test_chi_square(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    const int *prompt = fx->corpus.tokens + fx->corpus.n_train + 777;
    int n_prompt = 4;
    Sampler s = {1.0f, 0, 0.0f};
    // the exact chance of each (x1, x2): p(x1 | prompt) p(x2 | prompt, x1)
    double *expected = calloc((size_t)V * V, sizeof(double));
    float p1[256], p2[256];
    int ctx[8];
    memcpy(ctx, prompt, (size_t)n_prompt * sizeof(int));
    g->state.cache_len = 0;
    served_probs(p1, forward(g, ctx, n_prompt) + (size_t)(n_prompt - 1) * V, V, &s);
    for (int a = 0; a < V; a++) {
        ctx[n_prompt] = a;
        g->state.cache_len = 0;
        served_probs(p2, forward(g, ctx, n_prompt + 1) + (size_t)n_prompt * V, V, &s);
        for (int b = 0; b < V; b++) expected[a * V + b] = (double)p1[a] * p2[b];
    }
    TreeShape shape = {2, {6, 2}, 18}; // six siblings: a wrong Q would show in the later ones
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, S);
    RunOptions o = {.max_new_tokens = 3, .sampler = s, .vocab = &fx->vocab};
    long N = SANITIZED ? 2000 : 20000, *counts = calloc((size_t)V * V, sizeof(long));
    int seq[16];
    for (long i = 0; i < N; i++) { // x1 from the prefill, x2 (and x3) from a tree round
        RunStats st = {0};
        Rng rng;
        rng_seed(&rng, 1000 + (uint64_t)i);
        o.rng = &rng;
        o.st = &st;
        tree_generate(g, &fx->bigram, &tb, &(Tokens){prompt, n_prompt}, &o, seq);
        counts[seq[n_prompt] * V + seq[n_prompt + 1]]++;
    }
    double total = 0.0;
    for (int i = 0; i < V * V; i++) {
        total += expected[i];
    }
    for (int i = 0; i < V * V; i++) expected[i] *= N / total;
    int df;
    double chi = chi_square(counts, expected, V * V, &df);
    // the 0.999 quantile of chi-square with df degrees of freedom (Wilson-Hilferty)
    double z = 3.09, h = 2.0 / (9.0 * df);
    double limit = df * pow(1.0 - h + z * sqrt(h), 3.0);
    char what[300];
    snprintf(what, sizeof(what), "chi-square, end to end: the first two tokens of %ld tree runs "
             "(6,2, bigram, t = 1) against p(x1) p(x2 | x1): %.1f on %d degrees of freedom "
             "(below %.1f, the 0.999 quantile)", N, chi, df, limit);
    expect("BREAK_TREE_Q", chi < limit, what);
    free(expected);
    free(counts);
    free_tree_buffers(&tb);
}


// ----------------------------------------------------------------------------
// 7. The served distribution in a tree: top-k and top-p on both sides

// The served row after each position of seq[0 .. n-1] (n <= S, one causal pass from slot 0):
// rows (n, V), row j the one token j+1 was drawn from, as the tree's pass computed it (a
// path's row is the causal pass's, bit for bit: check 2).
static void served_rows(GPT *g, const int *seq, int n, const Sampler *s, float *rows) {
    int V = g->config.vocab_size;
    g->state.cache_len = 0;
    const float *logits = forward(g, seq, n);
    for (int j = 0; j < n; j++) served_probs(rows + (size_t)j * V, logits + (size_t)j * V, V, s);
}

static void test_filters(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    // (a) chi-square of the first two tokens, as check 5, with the rows cut: x1 from the
    // prefill, x2 from the first tree round, against p(x1) p(x2 | x1) of the served rows
    const int *prompt = fx->corpus.tokens + fx->corpus.n_train + 1234;
    int n_prompt = 4, ctx[8];
    Sampler s = {1.0f, 8, 0.9f}, unfiltered = {1.0f, 0, 0.0f};
    double *expected = calloc((size_t)V * V, sizeof(double));
    double *wrong = calloc((size_t)V * V, sizeof(double)); // the negative control: uncut rows
    float p1[256], p2[256], u1[256], u2[256];
    memcpy(ctx, prompt, (size_t)n_prompt * sizeof(int));
    g->state.cache_len = 0;
    const float *l1 = forward(g, ctx, n_prompt) + (size_t)(n_prompt - 1) * V;
    served_probs(p1, l1, V, &s);
    served_probs(u1, l1, V, &unfiltered);
    for (int a = 0; a < V; a++) {
        ctx[n_prompt] = a;
        g->state.cache_len = 0;
        const float *l2 = forward(g, ctx, n_prompt + 1) + (size_t)n_prompt * V;
        served_probs(p2, l2, V, &s);
        served_probs(u2, l2, V, &unfiltered);
        for (int b = 0; b < V; b++) {
            expected[a * V + b] = (double)p1[a] * p2[b];
            wrong[a * V + b] = (double)p1[a] * u2[b]; // x1 is the prefill's, cut either way
        }
    }
    TreeShape shape = {2, {4, 2}, 12}; // four siblings out of a row cut to at most 8 tokens
    TreeBuffers tb;
    build_tree_buffers(&tb, &shape, V, S);
    RunOptions o = {.max_new_tokens = 2, .sampler = s, .vocab = &fx->vocab};
    long N = SANITIZED ? 2000 : 6000, outside = 0, *counts = calloc((size_t)V * V, sizeof(long));
    int seq[64];
    for (long i = 0; i < N; i++) {
        RunStats st = {0};
        Rng rng;
        rng_seed(&rng, 90000 + (uint64_t)i);
        o.rng = &rng;
        o.st = &st;
        tree_generate(g, &fx->bigram, &tb, &(Tokens){prompt, n_prompt}, &o, seq);
        int cell = seq[n_prompt] * V + seq[n_prompt + 1];
        counts[cell]++;
        outside += expected[cell] == 0.0; // a pair the served rows give no chance
    }
    double total = 0.0, total_wrong = 0.0;
    for (int i = 0; i < V * V; i++) {
        total += expected[i];
        total_wrong += wrong[i];
    }
    for (int i = 0; i < V * V; i++) {
        expected[i] *= N / total;
        wrong[i] *= N / total_wrong;
    }
    int df, df_wrong;
    double chi = chi_square(counts, expected, V * V, &df);
    double chi_wrong = chi_square(counts, wrong, V * V, &df_wrong);
    char what[400];
    snprintf(what, sizeof(what), "top-k 8 and top-p 0.9 in a tree, end to end: the first two "
             "tokens of %ld tree runs (4,2, bigram, t = 1) against the served p(x1) p(x2 | x1): "
             "chi-square %.1f on %d degrees of freedom (below %.1f, the 0.999 quantile); %ld of "
             "them a pair the served rows give no chance (must be 0)", N, chi, df,
             chi_limit(df), outside);
    expect("BREAK_TREE_FILTER", chi < chi_limit(df) && outside == 0, what);
    snprintf(what, sizeof(what), "negative control: the same counts against the uncut target "
             "p(x2 | x1) give chi-square %.1f on %d degrees of freedom (must be above %.1f)",
             chi_wrong, df_wrong, chi_limit(df_wrong));
    expect(NULL, chi_wrong > chi_limit(df_wrong), what);
    free(expected);
    free(wrong);
    free(counts);
    free_tree_buffers(&tb);

    // (b) every token of whole texts lies in its served row: texts that fill the window to
    // its last slot (no restart), so that one causal pass gives every row they came from
    TreeShape big = {4, {3, 2, 1, 1}, 21};
    build_tree_buffers(&tb, &big, V, S);
    const Sampler cuts[] = {{1.0f, 5, 0.0f}, {0.8f, 0, 0.8f}, {1.2f, 10, 0.9f}};
    Draft *drafts[2] = {&fx->bigram, &fx->gpt};
    float *rows = malloc((size_t)S * V * sizeof(float));
    long tokens = 0, bad = 0, n_runs = SANITIZED ? 5 : 20;
    n_prompt = 4;
    int max_new_tokens = S - n_prompt; // the text ends in the window's last slot
    for (int ci = 0; ci < 3; ci++)
        for (int di = 0; di < 2; di++)
            for (long i = 0; i < n_runs; i++) {
                const int *pr = fx->corpus.tokens + fx->corpus.n_train + 300 + 211 * i;
                RunStats st = {0};
                Rng rng;
                rng_seed(&rng, 77 + (uint64_t)i);
                RunOptions ro = {.max_new_tokens = max_new_tokens, .sampler = cuts[ci], .vocab = &fx->vocab,
                                 .rng = &rng, .st = &st};
                tree_generate(g, drafts[di], &tb, &(Tokens){pr, n_prompt}, &ro, seq);
                served_rows(g, seq, S, &cuts[ci], rows);
                for (int j = n_prompt - 1; j < S - 1; j++) { // row j gave token j+1
                    tokens++;
                    bad += rows[(size_t)j * V + seq[j + 1]] <= 0.0f;
                }
            }
    snprintf(what, sizeof(what), "every token a tree emits lies in its served row (top-k 5; "
             "top-p 0.8; top-k 10 and top-p 0.9; 3,2,1,1, bigram and gpt): %ld of %ld tokens "
             "have p = 0 after the filter (must be 0)", bad, tokens);
    expect("BREAK_TREE_FILTER", bad == 0 && tokens > 0, what);
    free(rows);
    free_tree_buffers(&tb);
}

// ----------------------------------------------------------------------------
// 8. Speed floors: a tree's alpha and tokens per verify pass
//
// The rule is exact whatever q the draft gives, so a draft that builds its rows wrongly
// emits the right distribution, only slower: the checks above cannot see it. Floors can.
// The values were measured on the shipped model, with these seeds and prompts, by this
// test's own release build (the lines it prints); each floor is 85% of the measured value.
// The run is deterministic, so the margin only has to absorb a change that moves the random
// stream. The planted bugs cost more: the bigram drafting from its parent's token
// (BREAK_TREE_DRAFT_TOKEN) gave alpha 0.409 against 0.518 (79%), the model draft reading its
// parents' tokens (BREAK_TREE_DRAFT_INPUT) 0.431 against 0.826 (52%).
#define FLOOR 0.85
typedef struct {
    const char *draft;
    double alpha, tokens_per_pass; // as measured
} Floor;

static void test_floors(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    TreeShape shape = {4, {3, 2, 1, 1}, 21};
    Draft *drafts[2] = {&fx->bigram, &fx->gpt};
    // measured by this test's release build (the "measured:" lines it prints), 1000 tokens:
    // TEST_BUILD=../../tmp/tb_tree TESTS_FILTER=test_tree bash test/run_tests.sh; the
    // sanitizer build's 200 tokens gave 0.518, 2.052 (bigram) and 0.852, 2.843 (gpt)
    const Floor measured[2] = {{"bigram", 0.518, 2.051}, {"gpt", 0.826, 2.730}};
    int max_new_tokens = SANITIZED ? 200 : 1000;
    int *seq = malloc(sizeof(int) * (size_t)(64 + max_new_tokens));
    for (int di = 0; di < 2; di++) {
        TreeBuffers tb;
        build_tree_buffers(&tb, &shape, V, S);
        RunStats st = {0};
        Rng rng;
        rng_seed(&rng, 2025);
        RunOptions o = {.max_new_tokens = max_new_tokens, .sampler = {1.0f, 0, 0.0f}, .vocab = &fx->vocab,
                        .rng = &rng, .st = &st};
        const int *prompt = fx->corpus.tokens + fx->corpus.n_train + 5000;
        tree_generate(g, drafts[di], &tb, &(Tokens){prompt, 8}, &o, seq);
        double alpha = stats_alpha(&st.core), tpp = ratio(st.core.round_tokens, st.core.rounds);
        printf("  measured: %s draft, 3,2,1,1, t = 1, seed 2025, %d tokens: alpha %.4f, %.4f "
               "tokens per verify pass (%ld rounds)\n", drafts[di]->name, max_new_tokens, alpha, tpp,
               st.core.rounds);
        const Floor *f = &measured[di];
        char what[300];
        snprintf(what, sizeof(what), "speed floor, %s draft, tree 3,2,1,1, t = 1: alpha %.3f "
                 "(floor %.3f, %.0f%% of %.3f) and %.3f tokens per verify pass (floor %.3f, "
                 "%.0f%% of %.3f)", f->draft, alpha, FLOOR * f->alpha, 100 * FLOOR, f->alpha,
                 tpp, FLOOR * f->tokens_per_pass, 100 * FLOOR, f->tokens_per_pass);
        expect(di == 0 ? "BREAK_TREE_DRAFT_TOKEN" : "BREAK_TREE_DRAFT_INPUT",
               alpha >= FLOOR * f->alpha && tpp >= FLOOR * f->tokens_per_pass, what);
        free_tree_buffers(&tb);
    }
    free(seq);
}

// ----------------------------------------------------------------------------
// 9. Greedy trees draft as trees: every child a level asks for, not a chain

static void test_greedy_width(Fixture *fx) {
    GPT *g = &fx->model;
    int V = fx->vocab.size, S = g->config.block_size;
    TreeShape shape = {4, {3, 2, 1, 1}, 21};
    Draft *drafts[2] = {&fx->bigram, &fx->gpt};
    for (int di = 0; di < 2; di++) {
        TreeBuffers tb;
        build_tree_buffers(&tb, &shape, V, S);
        tb.top = 1; // t = 0: the draft's top children, as run_tree and ./beyond set it
        RunStats st = {0};
        Rng rng;
        rng_seed(&rng, 3);
        RunOptions o = {.sampler = {0.0f, 0, 0.0f}, .vocab = &fx->vocab, .rng = &rng, .st = &st};
        long rounds = 0, guesses = 0, room = 0, full = 0, full_guesses = 0;
        // short texts from many places, each from a nearly empty cache: the window has room
        // for the whole tree (22 rows of 32 slots) in a text's first rounds only
        for (int e = 0; e < (SANITIZED ? 4 : 40); e++) {
            int seq[128], n_seq = 2 + e % 6;
            memcpy(seq, fx->corpus.tokens + fx->corpus.n_train + 7000 + 389 * e,
                   (size_t)n_seq * sizeof(int));
            g->state.cache_len = 0;
            forward(g, seq, n_seq - 1); // the cache holds every token before current_token
            if (drafts[di]->kind->restart) // the gpt draft's cache starts empty
                drafts[di]->kind->restart(drafts[di], g, n_seq - 1, 0);
            for (int end = n_seq + 40; n_seq < end;) {
                tb.limit = 1000;
                int n = tree_round(g, drafts[di], &tb, &(Tokens){seq, n_seq}, &o);
                memcpy(seq + n_seq, tb.emitted, (size_t)n * sizeof(int));
                n_seq += n;
                rounds++;
                guesses += tb.rows - 1;
                room += tb.room - 1; // the guesses the window had slots for: at most 21
                if (tb.room == tb.max_rows) { // room for the whole tree
                    full++;
                    full_guesses += tb.rows - 1;
                }
            }
        }
        double mean = ratio(guesses, rounds), mean_full = ratio(full_guesses, full);
        char what[400];
        snprintf(what, sizeof(what), "a greedy tree drafts as a tree (3,2,1,1, %s draft, t = 0): "
                 "%.2f guesses a round where the window had room for all 21 (%ld rounds; must "
                 "be above 20, a chain of K = 4 drafts 4); %.2f over all %ld rounds, against "
                 "%.2f slots the window left (must be at least 95%% of them)", drafts[di]->name,
                 mean_full, full, mean, rounds, ratio(room, rounds));
        expect("BREAK_TREE_GREEDY_WIDTH", full > 0 && mean_full > 20.0 && guesses >= 0.95 * room,
               what);
        free_tree_buffers(&tb);
    }
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (BUG[0]) printf("broken build -D%s: the checks that must catch it run, and must fail\n", BUG);
    Fixture fx;
    memset(&fx, 0, sizeof(fx));
    char err[512] = "";
    DraftInputs in = {&fx.vocab, &fx.corpus, 32, &fx.model, 4, NULL}; // 4: Medusa's heads
    if (load_checkpoint(MODEL_PATH, &fx.model, &fx.vocab, err, sizeof(err)) != 0 ||
        load_corpus(&fx.corpus, CORPUS_PATH, &fx.vocab, err, sizeof(err)) != 0 ||
        setup_draft("bigram", &in, &fx.bigram, err, sizeof(err)) != 0 ||
        setup_draft("gpt", &in, &fx.gpt, err, sizeof(err)) != 0 ||
        setup_draft("medusa", &in, &fx.medusa, err, sizeof(err)) != 0 ||
        setup_draft("cascade", &in, &fx.cascade, err, sizeof(err)) != 0) {
        check(0, "load the corpus, the model and the drafts (run 'make data'): %s", err);
        return 1;
    }
    (void)usage; (void)run_generation;
    double t0 = now_seconds();
    if (runs("BREAK_TREE_Q")) test_enumeration(&fx);
    printf("(enumeration: %.1f s)\n", now_seconds() - t0);
    if (runs("BREAK_TREE_MASK")) test_masked_pass(&fx);
    if (!BUG[0]) test_chain_mask(&fx); // a chain's mask is a row of ones up to its own slot
    if (runs("BREAK_TREE_COMPACT BREAK_TREE_LAST BREAK_TREE_CASCADE_CATCHUP"))
        test_cache_after_rounds(&fx);
    if (runs("BREAK_TREE_HIDDEN BREAK_TREE_PREFILL_ROW")) test_medusa_row(&fx);
    t0 = now_seconds();
    if (!BUG[0]) test_greedy(&fx); // no broken build breaks greedy equivalence
    printf("(greedy: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    if (runs("BREAK_TREE_Q")) test_chi_square(&fx);
    printf("(chi-square: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    if (runs("BREAK_TREE_FILTER")) test_filters(&fx);
    printf("(filters: %.1f s)\n", now_seconds() - t0);
    t0 = now_seconds();
    if (runs("BREAK_TREE_DRAFT_TOKEN BREAK_TREE_DRAFT_INPUT")) test_floors(&fx);
    if (runs("BREAK_TREE_GREEDY_WIDTH")) test_greedy_width(&fx);
    printf("(floors and greedy width: %.1f s)\n", now_seconds() - t0);
    free_gpt(&fx.model);
    free_draft(&fx.bigram);
    free_draft(&fx.gpt);
    free_draft(&fx.medusa);
    free_draft(&fx.cascade);
    free_corpus(&fx.corpus);
    printf("test_tree summary: %d checks passed and %d failed\n", n_passed, n_failed);
    return n_failed > 0;
}
