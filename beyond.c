/*
 * beyond.c: what the papers and the serving engines add to specdec.c's lesson.
 *
 * What this is
 *   specdec.c is the blog's lesson alone: a bigram draft, a chain of K guesses, one verify
 *   pass, accept/reject, trim. This file includes it whole and goes on where the blog stops:
 *     - drafts that know more than one character, each behind one interface (restart, rows,
 *       verify, keep) and named once in the table DRAFTS:
 *         a small GPT of the target's family with a KV cache of its own (Leviathan et al.
 *         2023, Chen et al. 2023); prompt lookup (copy what followed an earlier occurrence of
 *         the text's ending); Medusa heads on the target's own hidden row (Cai et al. 2024);
 *         the early exit, the target's own first block drafting into the target's own KV
 *         cache (self-speculative decoding: Zhang et al. 2023, Elhoushi et al. 2024); EAGLE,
 *         a head that drafts the target's features (Li et al. 2024); a staged cascade, the
 *         bigram drafting for the GPT draft (Spector and Re 2023);
 *     - the served distribution: top-k and top-p, cut alike on the target and the draft;
 *     - --draft-p-min: a draft that stops guessing when it is unsure;
 *     - a tree of guesses (SpecInfer, Medusa, EAGLE): several children per node, verified
 *       in ONE masked target pass, judged child by child with an exact rule;
 *     - the refill of a full cache folded into the round's verify pass;
 *     - --ffn-width: the same model padded with zeros, to see where memory bandwidth bites;
 *     - colours by where each character came from, where the time went, and the speed models.
 *   It has ONE loop, tree_generate: a chain of K guesses is a tree of width 1, and plain
 *   decoding a tree of no levels. It reuses specdec.c's draft table, sampling, model,
 *   cache rollback, loading, trace and stats; its one copy is the masked forward pass.
 *
 * Build, run
 *   make beyond && ./beyond --tree 2,2,1 --draft bigram -t 1 --compare
 *   ./beyond --draft lookup --trace -n 40     # a chain, drawn as a tree of one child a level
 *   ./beyond --draft early-exit -t 1 --compare  # the target drafts for itself
 *   ./beyond --selftest                       # greedy equivalence of every draft and shape
 *
 * Map: the idea, where it comes from, and where it is here (the sections, in this order)
 *   The served distribution
 *     top-k and top-p on both sides (serving engines)       apply_top_k_top_p()
 *   A tree of guesses: its shape, its buffers, its masked pass
 *     several children per node, drawn without replacement   add_children()
 *     one masked pass: specdec.c's forward, copied, in 3   tree_forward(), masked_blocks()
 *   The drafts: one interface, each draft in its own part    DraftKind, DRAFTS[]
 *     the catch-up of a draft with its own cache, once       draft_lag()
 *     the blog's bigram table                                bigram_rows()
 *     prompt lookup (serving engines)                        lookup_match()
 *     a small GPT with its own cache (Leviathan, Chen 2023)  gpt_rows(), gpt_keep()
 *     Medusa heads on the target's hidden row (Cai 2024)     medusa_logits()
 *     the early exit, one cache (Zhang 2023, Elhoushi 2024)  exit_rows(), exit_verify()
 *     EAGLE: a head that drafts features (Li 2024)           eagle_rows(), eagle_keep()
 *     a staged cascade (Spector and Re 2023)                 cascade_round()
 *   The tree's phases
 *     grow it level by level                                 draft_tree()
 *     verify it in one pass                                  verify_tree()
 *     the exact rule, child by child                         judge_children()
 *     the accepted path's rows moved into place              compact_kv_cache()
 *   Stats, colours and the trace of a tree round             print_run_stats(), trace_tree()
 *     where the time went, c(T), an account of the run       print_time_table(), print_accounting()
 *   The one loop                                             tree_round(), tree_generate()
 *     the refill folded into the verify pass                 restart_cache()
 *   Loading: files tied to the target; --ffn-width's model   read_tied_file(), widen_ffn()
 *   Self-test, then the command line                         beyond_selftest(), main()
 *
 * Size letters are specdec.c's, and: N the guesses of a whole tree shape (21 for 3,2,1,1),
 * D its levels (4); a chain of K is the shape 1,1,..,1 (N = D = K).
 */

#ifndef TESTING
#define BEYOND_MAIN // this build is ./beyond: specdec.c's main is left out, ours is in
#define TESTING
#endif
#ifndef SPECDEC_C
#define SPECDEC_C "specdec.c" // a test's mutant build includes an edited copy instead
#endif
#include SPECDEC_C
#include <unistd.h> // isatty, for --color's default; sysconf, for --ffn-width's check

// ----------------------------------------------------------------------------
// The served distribution: temperature, then top-k and top-p, on both sides
//
// The blog samples from softmax(logits / t). Serving engines also cut the row: top-k keeps
// the k most likely tokens, top-p the fewest whose mass reaches p. The target's p must be
// the served row, or the output follows some other distribution; the draft's q must be the
// row its guess was really drawn from. Both sides are cut alike, so that q stays close to
// p (a guess the target's top-k removed could only be rejected; notes/math.md, section 8).

// What a token is really sampled from.
typedef struct {
    float temperature; // softmax(logits / t), the draft's row tempered alike; 0 = greedy
    int top_k;         // then keep the top_k most likely tokens; 0 = off
    float top_p;       // then keep the fewest most likely tokens whose mass reaches top_p;
                       // 0 (or 1) = off
} Sampler;

// Keeps the most likely entries of a probability row and renormalises it: first the top_k
// (if on), then the fewest whose mass reaches top_p (if on). Ties go to the lower index,
// in the target and the draft alike. Nothing changes at t = 0 (a one-hot row keeps its 1).
void apply_top_k_top_p(float *p, int V, const Sampler *s) {
    int use_k = s->top_k > 0 && s->top_k < V, use_p = s->top_p > 0.0f && s->top_p < 1.0f;
    if (s->temperature == 0.0f || (!use_k && !use_p)) return; // nothing to filter
    // order[r] = the index of the r-th most likely token: a stable insertion sort (ties keep the
    // lower index first) that only moves indices, so order is a permutation even with NaN in p
    int order[256]; // V <= 256 (validate_config)
    for (int i = 0; i < V; i++) {
        int r = i; // i's slot: after every token at least as likely, before every less likely
        for (; r > 0 && p[order[r - 1]] < p[i]; r--) order[r] = order[r - 1];
        order[r] = i;
    }
    // top-k's cut first; top-p then counts mass within it, as if top-k had renormalised
    int keep = use_k ? s->top_k : V, kept = 0; // kept: the tokens kept so far, of mass `mass`
    double top_k_mass = 0.0, mass = 0.0;
    for (int r = 0; r < keep; r++) top_k_mass += p[order[r]];
    // walk down the ranking until top-p's share of that mass is reached
    while (kept < keep) {
        mass += p[order[kept++]];
        if (use_p && mass >= s->top_p * top_k_mass) break; // enough mass: stop here
    }
    // zero everything past the cut, then rescale the kept tokens to sum to 1
    for (int r = kept; r < V; r++) p[order[r]] = 0.0f;
    for (int r = 0; r < kept; r++) p[order[r]] = (float)(p[order[r]] / mass);
}

// p = the served distribution of a row of logits (the target's, or a model draft's).
void served_probs(float *p, const float *logits, int V, const Sampler *s) {
    tempered_softmax(p, logits, V, s->temperature);
    apply_top_k_top_p(p, V, s);
}

// q = the bigram's row after token, served like the target's: tempered, then cut.
void bigram_served_probs(float *q, const BigramDraft *d, int token, const Sampler *s) {
    tempered_bigram(q, d, token, s->temperature);
    apply_top_k_top_p(q, d->V, s);
}

// ----------------------------------------------------------------------------
// A tree of guesses: its shape, its buffers, and the masked pass that verifies it
//
// A chain stakes each position on one guess: its first rejection ends the round. SpecInfer
// (Miao et al. 2024, arXiv:2305.09781), Medusa (Cai et al. 2024, arXiv:2401.10774) and EAGLE
// (Li et al. 2024, arXiv:2401.15077) draft a tree instead: several children per node, so that
// when one child is rejected a sibling may still pass. The whole tree goes through the target
// in ONE pass, each node at position cache_len + depth, attending to the cache and its own
// ancestors only (tree_forward's mask). Accept/reject then walks down from current_token,
// trying each node's children in order against Q, the row each was really drawn from
// (judge_children), and the path that passed keeps its rows of the KV cache
// (compact_kv_cache). `--tree 3,2,1,1` gives the children per node at each depth; the tree
// 1,1,1,1 is specdec.c's chain of K = 4, and the tree of no levels is plain decoding.
// The window cuts trees. Every row of a tree takes a slot of the 32-slot cache for one
// pass, and a round starts with current_token at slot cache_len: a restarted window leaves
// 17 slots (S - S/2 + 1), and each round's accepted path eats into them. The shape 3,2,1,1
// needs 22 rows, so it never fits whole: rows are drafted breadth first, the wide early
// levels take the slots, and the deep levels, where a chain earns its long runs, are the
// ones cut (the stats print the levels drafted a round and the rounds the window cut).
// Trees pay where a wide shape fits and the draft is unsure: `--tree 2,2,1 --draft bigram`
// gets more tokens per verify pass than the chain of 3 beside it; with the GPT draft, sure of
// its guesses, the chain's depth is worth more than a tree's siblings.
// This section holds what every draft below uses: the tree's buffers, its masks, and the
// masked pass (over a range of blocks, for the drafts that share the target's blocks); the
// phases that grow, judge and trim a tree come after the drafts.

#define TREE_MAX_DEPTH 16 // the most levels a --tree shape may have, and Medusa heads a file
#define MAX_LEVELS 64     // the most levels any shape holds: a chain of -k up to 64

// The shape of the trees a run drafts: width[d] children per node of depth d (current_token,
// the root, has depth 0). The rows of a tree are its nodes in breadth-first order.
typedef struct {
    int depth;                 // D: levels of guesses, e.g. 4 (0: plain decoding)
    int width[MAX_LEVELS];     // children per node at each level, e.g. {3, 2, 1, 1}
    int nodes;                 // the guesses of a whole tree: 3 + 3*2 + 6*1 + 6*1 = 21
} TreeShape;

// One round's tree, row by row: row 0 is current_token, rows 1 .. rows-1 the guesses in
// breadth-first order (a parent's row before its children's, so one pass runs them in row
// order, and a node's children sit in consecutive rows). One buffer per role: `p *tb`.
typedef struct TreeBuffers {
    TreeShape shape;  //           what the run asked for (a round may get less: room, limit)
    int max_rows;     // N+1       the root and the nodes of a full tree
    int V;            //           vocabulary size
    int rows;         //           this round's rows: the root and its guesses
    int *token;       // (N+1)     row r's token: current_token at row 0
    int *parent;      // (N+1)     the row of its parent; -1 at the root
    int *depth;       // (N+1)     0 at the root, 1 for its children, ...
    int *first_child; // (N+1)     the row of its first child; the others follow it
    int *n_children;  // (N+1)     its children: 0 for a leaf
    int *chosen;      // (N+1)     the first child, if the draft drew it itself (cascade); or -1
    float *q;         // (N+1, V)  q[r] = the draft's row that row r's children were drawn
                      //           from; when `top` is set, the row they were ranked by (the
                      //           draft's own): its top ones are the children
    float *own;       // (N+1, V)  the draft's own row at t = 1, unfiltered: --draft-p-min's
    float *p;         // (N+1, V)  p[r] = the target's served row after row r's token
    double *chance;   // (N+1)     the chance row r had to pass: min(1, p/Q) against the (p, Q)
                      //           it faced, after its earlier siblings' rejections
    double *u;        // (N+1)     the uniform that judged row r: it passed when u < chance
    char *verdict;    // (N+1)     'A' accepted, 'R' rejected, '.' never judged
    double *p_work;   // (V)       the p the next child is judged against: after each rejected
                      //           sibling, norm(max(p - Q, 0)) of the one before
    double *Q_work;   // (V)       the Q that child was drawn from: q without its earlier siblings
    int *path;        // (D+1)     rows of the accepted path: path[0] = 0, then one per depth
    int *emitted;     // (D+1)     tokens the round emits: the path's guesses, then one more
                      //           (none when the path already gives every token wanted)
    int *all_tokens;  // (S)       a pass's input: the restart's tokens, then its rows
    int *positions;   // (S)       each of those tokens' position: cache_len + depth for a row
    unsigned char *sees; // (S, S) the pass's mask: sees[t][s] = 1 when its token t attends
                      //           to cache slot s (the context, and t's own ancestors)
    int top;          //           children are the draft's top ones, each judged as a sure
                      //           guess (Q one-hot): greedy (t = 0), or lookup's certain copy;
                      //           else drawn from q without replacement
    int cache_len;    //           current_token's slot
    int restarted;    //           the cache was full: this round restarted the window
    int rerun;        //           tokens before current_token the pass reruns (a restart)
    int draft_ran;    //           rows 0 .. draft_ran-1 went through the draft's own pass
    int draft_passes; //           passes of a model draft this round (a table's or lookup's: 0)
    int room;         //           rows that fit this round: the cache's free slots from
                      //           current_token's on, at most max_rows
    int limit;        //           the deepest the path may go: the tokens still wanted
    int stopped;      //           1 when --draft-p-min ended the chain early this round
    int passed;       //           m: the guesses on the accepted path
} TreeBuffers;

// Draws up to `want` children of row r from the row q[r], appending them as new rows, and
// never more rows than `room`. Without replacement: each next child is drawn from q with
// the earlier ones removed, so siblings differ. With tb->top they are q's top ones instead.
// A first child the draft already drew (tb->chosen[r]) is taken as it is: it came from q.
static void add_children(TreeBuffers *tb, int r, int want, int room, Rng *rng) {
    int V = tb->V;
    float left[256]; // q without the children drawn so far (V <= 256)
    memcpy(left, tb->q + (size_t)r * V, (size_t)V * sizeof(float));
    tb->first_child[r] = tb->rows;
    tb->n_children[r] = 0;
    for (int i = 0; i < want && tb->rows < room; i++) {
        int drawn = i == 0 && tb->chosen[r] >= 0; // the cascade drew it in its inner rounds
        int x = drawn ? tb->chosen[r] : tb->top ? argmax(left, V)
                                                : sample_from(left, V, rng_uniform(rng));
        if (x < 0 || left[x] <= 0.0f) break; // q has no more tokens to give
        left[x] = 0.0f; // drawn: not again
        int c = tb->rows++; // the child's row, after every row so far: breadth-first
        tb->token[c] = x;
        tb->parent[c] = r;
        tb->depth[c] = tb->depth[r] + 1;
        tb->n_children[c] = 0;
        tb->verdict[c] = '.';
        tb->n_children[r]++;
    }
}

// The mask and positions of rows lo .. hi-1 for a pass that runs them at slots root + lo ..,
// into tb->positions and tb->sees from index `at`: each row sits at root + its depth and sees
// the context (slots 0 .. root, the root's included) and its own ancestors' slots, found by
// walking the parent rows up. root is current_token's slot in the target and a model draft;
// EAGLE's row for current_token sits one slot earlier (its input is the feature before it).
static void mask_rows(TreeBuffers *tb, int lo, int hi, int at, int S, int root) {
    for (int r = lo; r < hi; r++) {
        unsigned char *row = tb->sees + (size_t)(at + r - lo) * S;
        tb->positions[at + r - lo] = root + tb->depth[r];
        memset(row, 0, (size_t)S);
        memset(row, 1, (size_t)root + 1); // the context and current_token
        for (int a = r; a > 0; a = tb->parent[a]) row[root + a] = 1; // ancestors
    }
}

// The causal mask and positions of T tokens at slots first .. first+T-1, into rows 0 .. T-1 of
// tb->positions and tb->sees: each sees up to its own slot (a rerun window, a catch-up).
static void causal_rows(TreeBuffers *tb, int T, int first, int S) {
    for (int i = 0; i < T; i++) {
        unsigned char *row = tb->sees + (size_t)i * S;
        tb->positions[i] = first + i;
        memset(row, 0, (size_t)S);
        memset(row, 1, (size_t)(first + i + 1));
    }
}

// Copies cache slot `from` to slot `to` in every layer.
static void move_cache_row(GPT *g, int from, int to) {
    RunState *s = &g->state;
    size_t C = g->config.n_embd, S = g->config.block_size, row = C * sizeof(float);
    for (int l = 0; l < g->config.n_layer; l++) { // memmove: from may be to (a row in place)
        memmove(s->key_cache + (l * S + to) * C, s->key_cache + (l * S + from) * C, row);
        memmove(s->value_cache + (l * S + to) * C, s->value_cache + (l * S + from) * C, row);
    }
}

// Allocates the buffers of a tree of this shape for a target of block_size S.
int build_tree_buffers(TreeBuffers *tb, const TreeShape *shape, int V, int S) {
    *tb = (TreeBuffers){.shape = *shape, .max_rows = shape->nodes + 1, .V = V}; // +1: the root
    size_t N = (size_t)tb->max_rows, D = (size_t)shape->depth + 1;
    // a table per type, not a line per buffer (as specdec.c's alloc_each): (N+1), (D+1), (S)
    int **ints[] = {&tb->token, &tb->parent, &tb->depth, &tb->first_child, &tb->n_children,
                    &tb->chosen, &tb->path, &tb->emitted, &tb->all_tokens, &tb->positions};
    size_t n_int[] = {N, N, N, N, N, N, D, D, (size_t)S, (size_t)S};
    double **doubles[] = {&tb->chance, &tb->u, &tb->p_work, &tb->Q_work}; // (N+1), (V)
    size_t n_double[] = {N, N, (size_t)V, (size_t)V};
    float **floats[] = {&tb->q, &tb->own, &tb->p}; // (N+1, V)
    int ok = alloc_each(floats, (size_t[]){N * V, N * V, N * V}, 3) == 0;
    for (int i = 0; i < 10; i++) ok &= (*ints[i] = calloc(n_int[i], sizeof(int))) != NULL;
    for (int i = 0; i < 4; i++) ok &= (*doubles[i] = calloc(n_double[i], sizeof(double))) != NULL;
    tb->verdict = calloc(N, 1);
    tb->sees = calloc((size_t)S * S, 1);
    return ok && tb->verdict && tb->sees ? 0 : -1;
}

// Frees what build_tree_buffers allocated.
void free_tree_buffers(TreeBuffers *tb) {
    void *owned[] = {tb->token, tb->parent, tb->depth, tb->first_child, tb->n_children, tb->chosen,
                     tb->q, tb->own, tb->p, tb->chance, tb->u, tb->verdict, tb->p_work, tb->Q_work,
                     tb->path, tb->emitted, tb->all_tokens, tb->positions, tb->sees};
    free_all(owned, sizeof(owned) / sizeof(owned[0]));
    memset(tb, 0, sizeof(*tb));
}

// The masked pass: tree_forward is specdec.c's forward, copied, with one change: each token
// of the pass comes with its own position and its own row of the mask, so that a tree's
// nodes, side by side in the cache, each see only the context and their own ancestors. It
// reuses every layer of the model (embed, layernorm, matmul, relu, residual_add) and copies
// only attention (the mask) and the two functions around it. It is cut in three (embed_at,
// masked_blocks, apply_head) because the early exit runs the first blocks for its guesses
// and the verify pass the rest, and EAGLE runs one block on rows it made itself.
// specdec.c's attention, copied, with a mask: token t of the pass (slot pos0 + t) attends to
// the slots sees[t] marks. A slot it may not see scores -inf, which the softmax turns into a
// weight of exactly 0, and adds nothing to the output: a chain's mask marks every slot up to
// its own, and then the sums are the causal pass's, in the same order, bit for bit.
static void tree_attention(const Config *c, BlockActs *a, int T, int pos0,
                           const unsigned char *sees) {
    int C = c->n_embd, NH = c->n_head, S = c->block_size, HS = C / NH;
    float scale = 1.0f / sqrtf((float)HS); // the causal pass's scale: head_size ** -0.5
    for (int h = 0; h < NH; h++)
        for (int t = 0; t < T; t++) {
            int n = pos0 + t + 1; // a token's ancestors all sit in earlier slots than its own
            const unsigned char *row = sees + (size_t)t * S; // (S) its row of the mask
            const float *qh = a->q + (size_t)t * C + h * HS; // (HS) head h's query of token t
            float *w = a->att + ((size_t)h * S + t) * S; // its weights over the slots
            // one score per slot up to its own; -inf where the mask hides the slot
            for (int s = 0; s < n; s++) {
                const float *kh = a->keys + (size_t)s * C + h * HS;
                float score = 0.0f;
                for (int i = 0; i < HS; i++) score += qh[i] * kh[i];
                w[s] = row[s] ? score * scale : -INFINITY;
            }
            softmax(w, n); // a masked slot adds exp(-inf) = 0 to the sum: the sum is unchanged
            for (int s = n; s < S; s++) w[s] = 0.0f; // later slots: never seen
            // the weighted sum of the visible values, slots in order, as the causal pass sums
            float *oh = a->att_out + (size_t)t * C + h * HS;
            for (int i = 0; i < HS; i++) oh[i] = 0.0f;
            for (int s = 0; s < n; s++) {
                if (!row[s]) continue; // not an ancestor: it adds nothing, not even a 0
                const float *vh = a->values + (size_t)s * C + h * HS;
                for (int i = 0; i < HS; i++) oh[i] += w[s] * vh[i];
            }
        }
}

// specdec.c's block_forward, copied, with tree_attention in place of attention.
static void tree_block_forward(const GPT *g, int l, BlockActs *a, int T, int pos0,
                               const unsigned char *sees) {
    const Config *c = &g->config;
    const Weights *w = &g->w;
    int C = c->n_embd, H = c->ffn_width;
    size_t CC = (size_t)C * C, CH = (size_t)C * H; // layer l's (C, C) and (C, H) matrices
    // layer l's six Linears, as block_forward builds them
    Linear query = {w->query + l * CC, NULL, C, C};
    Linear key = {w->key + l * CC, NULL, C, C};
    Linear value = {w->value + l * CC, NULL, C, C};
    Linear proj = {w->proj_weight + l * CC, w->proj_bias + l * C, C, C};
    Linear up = {w->ffwd_up_weight + l * CH, w->ffwd_up_bias + l * H, C, H};
    Linear down = {w->ffwd_down_weight + l * CH, w->ffwd_down_bias + l * C, H, C};
    // attention sub-block: keys and values into the cache at slots pos0 .., then the mask
    layernorm(a->ln1, a->x_in, w->ln1_weight + l * C, w->ln1_bias + l * C, T, C);
    matmul(a->q, a->ln1, query, T);
    matmul(a->keys + (size_t)pos0 * C, a->ln1, key, T);
    matmul(a->values + (size_t)pos0 * C, a->ln1, value, T);
    tree_attention(c, a, T, pos0, sees); // the one line that differs from block_forward
    matmul(a->proj_out, a->att_out, proj, T);
    residual_add(a->x_mid, a->x_in, a->proj_out, (size_t)T * C);
    // MLP sub-block, unchanged: each token's own row, whatever the mask
    layernorm(a->ln2, a->x_mid, w->ln2_weight + l * C, w->ln2_bias + l * C, T, C);
    matmul(a->hidden, a->ln2, up, T);
    relu(a->hidden, (size_t)T * H);
    matmul(a->ffwd, a->hidden, down, T);
    residual_add(a->x_out, a->x_mid, a->ffwd, (size_t)T * C);
}

// x[t] = the embedding of tokens[t] at positions[t], into g->state.x: a node's position is
// cache_len + its depth, not its slot.
static void embed_at(GPT *g, const int *tokens, int T, const int *positions) {
    int C = g->config.n_embd;
    for (int t = 0; t < T; t++)
        embed(g->state.x + (size_t)t * C, &g->w, tokens + t, 1, positions[t], C);
}

// Runs blocks l0 .. l1-1 of g over the T residual rows in g->state.x, whose tokens sit at
// cache slots pos0 .., each attending to the slots its row of sees (T, S) marks. Writes those
// blocks' keys and values at the slots; leaves cache_len alone (the caller says what stays).
static void masked_blocks(GPT *g, int l0, int l1, int T, int pos0, const unsigned char *sees) {
    check_pass_fits(g, pos0, T); // the loops keep the window: a pass past it is a bug
    size_t layer = (size_t)g->config.block_size * g->config.n_embd; // a layer's slice of a cache
    for (int l = l0; l < l1; l++) {
        g->state.block.keys = g->state.key_cache + l * layer; // this layer's cache
        g->state.block.values = g->state.value_cache + l * layer;
        tree_block_forward(g, l, &g->state.block, T, pos0, sees);
        size_t bytes = (size_t)T * g->config.n_embd * sizeof(float); // T rows of the stream
        memcpy(g->state.x, g->state.block.x_out, bytes); // the next block's x_in
    }
}

// A LayerNorm, then a Linear to the vocabulary: a model's ln_f and lm_head, or an exit's own.
typedef struct {
    const float *ln_weight; // (C)
    const float *ln_bias;   // (C)
    Linear head;            // (C, V)
} Head;

// The model's own head: its ln_f and lm_head, read where they are now (--ffn-width moves them).
static Head model_head(const GPT *g) {
    const Weights *w = &g->w;
    Linear lm_head = {w->lm_head_weight, w->lm_head_bias, g->config.n_embd, g->config.vocab_size};
    return (Head){w->ln_f_weight, w->ln_f_bias, lm_head};
}

// logits = head(LayerNorm(x)) for T rows of x, per token, as forward runs ln_f and lm_head;
// normed (T, C) keeps the LayerNorm's rows (Medusa's heads read the target's).
static float *apply_head(Head h, const float *x, int T, float *normed, float *logits) {
    layernorm(normed, x, h.ln_weight, h.ln_bias, T, h.head.in);
    matmul(logits, normed, h.head, T);
    return logits;
}

// specdec.c's forward, copied, for a pass whose T tokens sit at slots cache_len .. and at
// the given positions, each attending to the slots its row of sees (T, S) marks.
float *tree_forward(GPT *g, const int *tokens, int T, const int *positions,
                    const unsigned char *sees) {
    RunState *s = &g->state;
    int pos0 = s->cache_len;
    check_pass_fits(g, pos0, T); // before embed_at writes T rows
    embed_at(g, tokens, T, positions);
    masked_blocks(g, 0, g->config.n_layer, T, pos0, sees);
    s->cache_len += T; // every row stays; compact_kv_cache keeps the accepted path's
    return apply_head(model_head(g), s->x, T, s->ln_f, s->logits); // as forward runs them
}

// ----------------------------------------------------------------------------
// The drafts: one interface, and each draft in its own part
//
// The blog drafts with a bigram table. The papers (Leviathan et al. 2023, Chen et al. 2023)
// draft with a smaller transformer of the target's family, which keeps a KV cache of its
// own; serving engines also offer prompt lookup, which copies what followed the last earlier
// occurrence of the text's ending; Medusa (Cai et al. 2024) reads the target's own hidden
// row with small extra heads; self-speculative decoding runs the target's own first blocks;
// EAGLE drafts the target's features; a cascade puts a draft under the draft. Accept/reject
// does not care which: any q is exact (notes/math.md), as long as each guess was really
// drawn from the q it is judged against.
//
// Every draft answers the loop's three questions, and the loop asks nothing else of it:
//   restart  the target's cache was filled from position 0 again (the prefill, or a full
//            window's restart): what becomes of the draft's own state?
//   rows     the rows a level's nodes' children are drawn from: q, and the draft's own row
//            at t = 1 (--draft-p-min reads it); a draft may also draw the children itself
//   keep     after accept/reject: what does it keep of the accepted path?
// and a draft that runs the verify pass itself (the early exit finishes it; EAGLE-3 taps it):
//   verify   the target's rows for the round, and what the draft needs of that pass
// A hook left NULL has nothing to do. A new draft is its part below (its hooks), its state's
// fields in struct Draft (freed by free_draft) and one row of DRAFTS; a draft with a file
// format of its own also has a reader in "Loading".

typedef struct Draft Draft;

#define UNUSED __attribute__((unused)) // a hook's parameter this draft does not need

// Each draft's file, as `make train-draft`, `train-medusa`, `train-exit`, `train-eagle` write it.
#define DEFAULT_DRAFT "tinyshakespeare/draft.bin"   // --draft gpt and cascade
#define DEFAULT_MEDUSA "tinyshakespeare/medusa.bin" // --draft medusa
#define DEFAULT_EXIT "tinyshakespeare/exit.bin"     // --draft early-exit
#define DEFAULT_EAGLE "tinyshakespeare/eagle.bin"   // --draft eagle

// What a draft's setup may read: the target, its vocabulary and corpus, the tree's depth, and
// the draft's file.
typedef struct {
    const Vocab *v;         // the target's vocabulary: a model draft must share it
    const Corpus *corpus;   // the bigram table is counted from its training split
    int block_size;         // the target's window: a model draft's must be the same
    GPT *target;            // the drafts that read the target (Medusa, early exit, EAGLE)
    int depth;              // the tree's levels (or K): Medusa needs a head for each
    const char *path;       // the draft's file; NULL: its untrained form (the self-test's)
} DraftInputs;

// One kind of draft: its name, and how the loop calls it.
typedef struct {
    const char *name;  // what --draft calls it
    const char *file;  // its file by default, or NULL
    const char *untrained; // NULL, or its name untrained (a self-test on another target)
    const char *about; // its line in -h
    int sure;          // 1: its one guess per level is certain (q one-hot), judged as greedy's
    const char *no_tree;  // NULL, or why it drafts no tree (--tree is then refused)
    const char *no_p_min; // NULL, or why --draft-p-min cannot apply to it (refused then)
    int (*setup)(Draft *d, const DraftInputs *in, char *err, size_t errlen); // NULL: nothing
    void (*restart)(Draft *d, const GPT *g, int prefilled, int rerun);
    void (*rows)(Draft *d, TreeBuffers *tb, const Tokens *text, int lo, const Sampler *s,
                 Rng *rng);
    const float *(*verify)(Draft *d, GPT *g, TreeBuffers *tb);
    void (*keep)(Draft *d, const GPT *g, const TreeBuffers *tb, int m);
} DraftKind;

// Medusa (Cai et al. 2024) drafts with no second model. The target's last hidden row h_j
// (ln_f's output at position j, RunState.ln_f) feeds its lm_head, which predicts token
// j+1; a few small heads read the same row and guess further ahead: head i (0-based)
// guesses token j+2+i. Each head is Medusa-1's residual block h' = h + SiLU(W h + b),
// then the target's own lm_head, frozen. W and b start at 0, so an untrained head is the
// target's next-token head. `tinyshakespeare/train medusa` trains them, load_medusa (in
// "Loading") reads them, and notes/training.md ("Medusa heads") measures their alpha.
typedef struct {
    int n_heads; // the heads: head i guesses i+2 tokens past h's     e.g. 4
    int C;       // the target's n_embd: the row each head reads      e.g. 64
    int V;       // the target's vocab_size: each head's logits       e.g. 65
    float *w;    // (n_heads, C, C) head i's W, stored (in, out) like every Linear; owns b
    float *b;    // (n_heads, C)    head i's bias, in w's allocation, after the matrices
} MedusaHeads;

// The early exit's head, after the target's first L blocks (its part below says how it
// drafts): its own LayerNorm and Linear(C, V), trained on the frozen target's rows
// (`tinyshakespeare/train exit` writes tinyshakespeare/exit.bin), or the target's own.
typedef struct {
    int layer;          // L: the exit reads the residual after blocks 0 .. L-1     e.g. 1
    int C;              // the target's n_embd                                       e.g. 64
    int V;              // the target's vocab_size                                   e.g. 65
    float *ln_weight;   // (C)     its LayerNorm, owning the allocation; NULL: untrained,
    float *ln_bias;     // (C)     the target's own ln_f and lm_head
    float *head_weight; // (C, V)  its head, stored (in, out) like every Linear
    float *head_bias;   // (V)
} ExitHead;

// EAGLE's head (its part below says how it drafts): a Linear (2C -> C) and one block shaped
// like the target's, and for EAGLE-3 a Linear (3C -> C) that fuses three of the target's
// rows first. `tinyshakespeare/train eagle` writes tinyshakespeare/eagle.bin.
typedef struct {
    int C;              // the target's n_embd                                       e.g. 64
    int n_feat;         // the target's rows it reads: 1 (EAGLE) or 3 (EAGLE-3)
    int feat_layer[3];  // after which blocks: {4} (EAGLE), e.g. {1, 2, 4} (EAGLE-3)
    float *fuse_weight; // (3C, C)  EAGLE-3: [low, middle, top] -> the fused row; NULL for
    float *fuse_bias;   // (C)      EAGLE; owns the allocation when set
    float *fc_weight;   // (2C, C)  [feature, embedding of the next token] -> the block's input;
                        //          owns the allocation when fuse_weight is NULL
    float *fc_bias;     // (C)
    GPT block;          // ONE block like the target's (n_layer 1) and its own KV cache; its
                        // embeddings, ln_f and lm_head are unused (the target's serve)
} EagleHead;

// A draft: its kind, and the state each kind keeps (the fields of the other kinds stay zero).
struct Draft {
    const DraftKind *kind; // what it is, and how the loop calls it
    const char *name;      // for the trace and the stats, e.g. "bigram"
    const char *path;      // its file, or NULL
    int V;                 // vocabulary size, the target's
    float p_min;           // --draft-p-min: a guess the draft itself gives less than this
                           // chance (at t = 1, unfiltered) is its chain's last; 0 = off
    GPT *target;           // the target, for the drafts that read it
    BigramDraft bigram;    // bigram, cascade: the table
    GPT model;             // gpt, cascade: a small GPT, with its own KV cache (model.state)
    int match_n;           // lookup: the n-gram length the round matched (0: none)
    int match_end;         //   and the index in the text where that earlier occurrence ended
    MedusaHeads medusa;    // medusa: the heads
    float *hidden;         // (C)     medusa: ln_f's row that current_token was drawn from
    ExitHead exit;         // early exit: its layer and head
    float *resid;          // (S, C)  early exit: each pass row's residual after block L-1
    EagleHead eagle;       // eagle: its Linear and block
    float *feat;           // (S, C)  eagle: the target's feature at each position of the window
    float *pred;           // (S, C)  eagle: the feature it predicted after each tree row
    float *eagle_in;       // (S, 2C) eagle: a pass's input rows, [feature, embedding]
    float *taps;           // (2, S, C) eagle-3: each pass row's rows after the low, mid block
    int taps_ready;        // eagle-3: 0 until a pass of the target has left its taps
    SpecBuffers inner;     // cascade: its inner round's buffers (specdec.c's, the blog's round)
    int *chain;            // (S)     cascade: the GPT draft's samples, chain[r] after row r
    int *pass_in;          // (S)     cascade: an inner pass's tokens: lagged, current, guesses
    float *chain_q;        // (S, V)  cascade: the GPT draft's served row each was drawn from
    float *chain_own;      // (S, V)  cascade: the same rows at t = 1, unfiltered
    int chain_n;           // cascade: the chain's guesses this round
};

// The file readers, in "Loading".
int load_medusa(const char *path, const GPT *target, MedusaHeads *m, char *err, size_t errlen);
int load_exit(const char *path, const GPT *target, ExitHead *e, char *err, size_t errlen);
int load_eagle(const char *path, const GPT *target, EagleHead *e, char *err, size_t errlen);

// q and own for rows lo .. tb->rows-1 from rows of logits: row r's at logits + (r-lo) stride
// (stride 0: one row for the whole level, Medusa's). own: t = 1, unfiltered; q: served.
static void rows_from_logits(TreeBuffers *tb, int lo, const float *logits, size_t stride,
                             const Sampler *s) {
    int V = tb->V;
    for (int r = lo; r < tb->rows; r++) {
        const float *row = logits + (size_t)(r - lo) * stride;
        tempered_softmax(tb->own + (size_t)r * V, row, V, 1.0f);
        served_probs(tb->q + (size_t)r * V, row, V, s);
    }
}

// THE CATCH-UP, for every draft with a cache of its own (gpt, cascade, eagle): the rows it must
// run before its row for current_token, which sits at slot `root` of its cache. Its keep
// trims its cache to the accepted path's rows it may keep, so between rounds it lags the
// target by the rest. The gpt draft and the cascade keep every path row they ran: they lag
// 1 token after a bonus (the leaf that passed, which no draft pass ran) and 0 after a
// leftover draw (every accepted guess was a row they had run). EAGLE keeps only rows made
// from the target's true features, so it lags by the whole accepted path: current_token and
// the guesses. After a restart every one lags by the whole rerun window (its cache restarts).
static int draft_lag(const GPT *model, int root) {
    return root - model->state.cache_len;
}

// --- The bigram table: the blog's draft, a row per node ---

// Counts the table from the training split, as the blog does.
static int bigram_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    if (BigramDraftModel(&d->bigram, in->corpus->tokens, in->corpus->n_train, d->V) == 0) return 0;
    return fail_with(err, errlen, "out of memory building the bigram table");
}

// A table row per node: after row r's token (a bigram's whole context is one token).
static void bigram_rows(Draft *d, TreeBuffers *tb, const Tokens *text UNUSED, int lo,
                        const Sampler *s, Rng *rng UNUSED) {
    for (int r = lo; r < tb->rows; r++) {
        float *q = tb->q + (size_t)r * tb->V, *own = tb->own + (size_t)r * tb->V;
        tempered_bigram(own, &d->bigram, tb->token[r], 1.0f);
        bigram_served_probs(q, &d->bigram, tb->token[r], s);
    }
}

// --- Prompt lookup: copy what followed an earlier occurrence of the text's ending ---

// Prompt lookup tries the longest n-gram first: the text's last n tokens, n from
// LOOKUP_MAX_N down to LOOKUP_MIN_N. Both are choices: a longer match predicts what follows
// better, a shorter one is found more often. It searches the last LOOKUP_WINDOW tokens
// only, so that a round's search costs the same however long the text grows.
#define LOOKUP_MAX_N 8
#define LOOKUP_MIN_N 2
#define LOOKUP_WINDOW 1024

// Prompt lookup: finds the most recent earlier occurrence of the text's last n tokens
// (prompt and generated text together), longest n first, into d->match_n and d->match_end;
// match_n = 0 when nothing matched. Its guesses are then the tokens that followed it.
void lookup_match(Draft *d, const Tokens *text) {
    d->match_n = 0;
    for (int n = LOOKUP_MAX_N; n >= LOOKUP_MIN_N; n--) {
        if (n > text->n - 1) continue; // too short a text for an earlier occurrence this long
        const int *tail = text->tok + text->n - n; // the last n tokens, current_token last
        // end = the index of an earlier occurrence's last token, newest first; it must have
        // a next token to propose, so end <= text->n - 2
        for (int end = text->n - 2; end >= n - 1 && end >= text->n - 1 - LOOKUP_WINDOW; end--) {
            if (memcmp(text->tok + end - n + 1, tail, (size_t)n * sizeof(int)) != 0) continue;
            d->match_n = n; // a match: its continuation is text[end+1 ..]
            d->match_end = end;
            return;
        }
    }
}

// One match a round (at the root's level), read level by level: one-hot at the token its
// match continues with at this depth, text[match_end + depth + 1], or an empty row (no
// child) where the text runs out. A copy is certain: there is nothing to temper or cut.
static void lookup_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo,
                        const Sampler *s UNUSED, Rng *rng UNUSED) {
    if (lo == 0) lookup_match(d, text);
    for (int r = lo; r < tb->rows; r++) {
        float *q = tb->q + (size_t)r * tb->V, *own = tb->own + (size_t)r * tb->V;
        int at = d->match_end + 1 + tb->depth[r];
        memset(own, 0, (size_t)tb->V * sizeof(float));
        if (d->match_n > 0 && at < text->n) own[text->tok[at]] = 1.0f;
        memcpy(q, own, (size_t)tb->V * sizeof(float));
    }
}

// --- A small GPT of the target's family, with a KV cache of its own ---

// What a file is for, in a refusal's words: its role ("draft checkpoint") and how to get one.
typedef struct {
    const char *what; // e.g. "draft checkpoint"
    const char *fix;  // e.g. "make train-draft writes one"
} FileRole;

// Reads and parses a checkpoint file into g and vocab; err names its role, path, problem and fix.
int read_checkpoint(const char *path, FileRole role, GPT *g, Vocab *vocab, char *err,
                    size_t errlen) {
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, role.what, role.fix, err, errlen);
    char why[256]; // the reason alone; the message below adds what, path and fix
    int rc = buf ? parse_checkpoint(buf, n, g, vocab, why, sizeof(why)) : -1;
    if (buf && rc != 0) fail_with(err, errlen, "%s '%s': %s (%s)", role.what, path, why, role.fix);
    free(buf); // the parameters were copied out of it
    return rc;
}

// Reads the checkpoint at in->path (tinyshakespeare/draft.bin, or --draft's path), which must
// share the target's vocabulary and block size (the caches restart together).
static int gpt_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    const char *path = in->path ? in->path : DEFAULT_DRAFT;
    Vocab dv;
    FileRole role = {"draft checkpoint", "make train-draft writes " DEFAULT_DRAFT "; --draft takes "
                                         "a draft's name (./beyond -h) or a checkpoint's path"};
    if (read_checkpoint(path, role, &d->model, &dv, err, errlen) != 0) return -1;
    d->path = path;
    if (dv.size != in->v->size || memcmp(dv.chars, in->v->chars, (size_t)in->v->size) != 0)
        return fail_with(err, errlen, "draft '%s' has another vocabulary than the target's (%d "
                         "and %d characters): its token ids would mean other characters; train "
                         "the draft on the target's corpus", path, dv.size, in->v->size);
    if (d->model.config.block_size != in->block_size)
        return fail_with(err, errlen, "draft '%s' has block_size %d, the target %d: both caches "
                         "restart together; train the draft with --block %d", path,
                         d->model.config.block_size, in->block_size, in->block_size);
    return 0;
}

// Its cache restarts with the target's: its next pass catches up on the same window.
static void gpt_restart(Draft *d, const GPT *g UNUSED, int prefilled UNUSED, int rerun UNUSED) {
    d->model.state.cache_len = 0;
}

// The root's level: one pass over the tokens it lags and current_token. Each later level:
// one masked pass, each row attending to its own ancestors in the draft's cache, as the
// target's pass will.
static void gpt_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo, const Sampler *s,
                     Rng *rng UNUSED) {
    int V = tb->V, hi = tb->rows;
    const float *logits;
    if (lo == 0) { // catch up on the tokens the draft lags, then current_token
        int lag = draft_lag(&d->model, tb->cache_len);
        logits = forward(&d->model, text->tok + text->n - 1 - lag, lag + 1) + (size_t)lag * V;
    } else { // one masked pass over the level
        mask_rows(tb, lo, hi, 0, d->model.config.block_size, tb->cache_len);
        logits = tree_forward(&d->model, tb->token + lo, hi - lo, tb->positions, tb->sees);
    }
    rows_from_logits(tb, lo, logits, (size_t)V, s);
    tb->draft_ran = hi; // rows 0 .. hi-1 sit in its cache, by row
    tb->draft_passes++;
}

// It keeps the accepted path's rows it ran, moved into place as the target's are, and drops
// the rest: what the catch-up's invariant says.
static void gpt_keep(Draft *d, const GPT *g UNUSED, const TreeBuffers *tb, int m) {
    GPT *draft = &d->model;
    int kept = 0; // the path's rows the draft ran: a prefix of the path
    while (kept < m && tb->path[kept + 1] < tb->draft_ran) {
        kept++;
        move_cache_row(draft, tb->cache_len + tb->path[kept], tb->cache_len + kept);
    }
    if (draft->state.cache_len > tb->cache_len + 1 + kept)
        trim_kv_cache(draft, 1 + kept, tb->cache_len);
}

// --- Medusa heads on the target's hidden row ---

// Head `head`'s logits (V) from one hidden row (C) of the target: lm_head(h + SiLU(W h + b)).
// Head 0 guesses the token 2 places after the one whose row this is (1 after current_token).
void medusa_logits(const MedusaHeads *m, const GPT *target, const float *hidden, int head,
                   float *logits) {
    int C = m->C, V = m->V;
    const float *W = m->w + (size_t)head * C * C; // this head's (C, C) matrix
    const float *b = m->b + (size_t)head * C;
    float u[4096]; // C <= 4096 (validate_config): W h + b, then h'
    matmul(u, hidden, (Linear){W, b, C, C}, 1); // u = W h + b: one token through the head's Linear
    // h' = h + SiLU(u), SiLU(u) = u * sigmoid(u): an exact 0 for a zero head, so h' = h
    for (int o = 0; o < C; o++) u[o] = hidden[o] + u[o] / (1.0f + expf(-u[o]));
    // the target's lm_head, run as forward runs it: a zero head gives its logits, bit for bit
    matmul(logits, u, (Linear){target->w.lm_head_weight, target->w.lm_head_bias, C, V}, 1);
}

// Frees what load_medusa allocated; safe on a zeroed MedusaHeads, and twice.
void free_medusa(MedusaHeads *m) {
    free(m->w); // b points into the same allocation
    memset(m, 0, sizeof(*m));
}

// The heads at in->path for the target, at least one per level (in->depth 0: the file's own
// depth, the self-test's); path NULL: zero heads (each the target's own next-token head, 8
// for the self-test's deepest chain).
static int medusa_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    int C = in->target->config.n_embd, N = in->depth ? in->depth : 8;
    d->hidden = alloc_floats((size_t)C);
    float *w = in->path ? NULL : alloc_floats((size_t)N * (C + 1) * C); // untrained: W, b = 0
    d->medusa = (MedusaHeads){N, C, d->V, w, w ? w + (size_t)N * C * C : NULL};
    if (!d->hidden || (!in->path && !w))
        return fail_with(err, errlen, "out of memory for the medusa heads");
    if (!in->path) return 0;
    if (load_medusa(in->path, in->target, &d->medusa, err, errlen) != 0) return -1;
    if (in->depth > d->medusa.n_heads)
        return fail_with(err, errlen, "--draft medusa has %d heads, one per level, and the "
                         "run drafts %d levels (-k, the default -k 4, or --tree's depth); give "
                         "at most %d", d->medusa.n_heads, N, d->medusa.n_heads);
    return 0;
}

// After the prefill, the heads read its last row (ln_f's, the one the first token came from);
// a window's restart changes no row they read: keep's row stays.
static void medusa_restart(Draft *d, const GPT *g, int prefilled, int rerun UNUSED) {
    if (prefilled == 0) return;
    int C = g->config.n_embd;
    memcpy(d->hidden, g->state.ln_f + (size_t)(prefilled - 1) * C, (size_t)C * sizeof(float));
}

// One head per level, on the row current_token came from: the same row for every node.
static void medusa_rows(Draft *d, TreeBuffers *tb, const Tokens *text UNUSED, int lo,
                        const Sampler *s, Rng *rng UNUSED) {
    float row[256]; // V <= 256
    medusa_logits(&d->medusa, d->target, d->hidden, tb->depth[lo], row);
    rows_from_logits(tb, lo, row, 0, s);
}

// It keeps ln_f's row of the node whose p gave the round's last token: the next round's
// guesses come from it.
static void medusa_keep(Draft *d, const GPT *g, const TreeBuffers *tb, int m UNUSED) {
    int C = g->config.n_embd;
    const float *h = g->state.ln_f + (size_t)(tb->rerun + tb->path[tb->passed]) * C;
    memcpy(d->hidden, h, (size_t)C * sizeof(float));
}

// --- The early exit: the target's own first blocks (self-speculative decoding) ---
//
// Self-speculative decoding (Zhang et al. 2023, "Draft & Verify"; Elhoushi et al. 2024,
// "LayerSkip") drafts with the target itself: its first L blocks, then a head. The untrained
// exit's head is the target's own ln_f and lm_head, which read the residual after block L
// badly (the model was trained through all its blocks); the trained exit's is its own.
// The exit's blocks are the target's blocks on the same tokens, so the keys and values it
// writes in layers 0 .. L-1 are those the verify pass would write there, bit for bit (a row's
// sums do not depend on how many tokens share the pass). So it keeps no cache of its own: it
// drafts INTO the target's cache, layers 0 .. L-1, at each tree row's slot, and keeps each
// row's residual after block L-1 (d->resid). The verify pass then runs blocks 0 .. L-1 only
// for the rows it did not run (the last level's) and blocks L .. for every row, starting
// from those residuals (exit_verify): the drafting is the first part of the verify pass, not
// extra work. Only the exit's head, a LayerNorm and a Linear per guess, is extra.

// The exit's head: its own (exit.bin), or the target's ln_f and lm_head (untrained).
static Head exit_head(const Draft *d) {
    const ExitHead *e = &d->exit;
    if (!e->ln_weight) return model_head(d->target);
    return (Head){e->ln_weight, e->ln_bias, {e->head_weight, e->head_bias, e->C, e->V}};
}

// The trained exit at in->path, or (path NULL) the untrained one after block 1.
static int exit_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    const Config *c = &in->target->config;
    d->resid = alloc_floats((size_t)c->block_size * c->n_embd);
    if (!d->resid) return fail_with(err, errlen, "out of memory for the early exit");
    d->exit = (ExitHead){.layer = 1, .C = c->n_embd, .V = c->vocab_size}; // a file's: its own
    if (in->path && load_exit(in->path, in->target, &d->exit, err, errlen) != 0) return -1;
    if (d->exit.layer >= c->n_layer)
        return fail_with(err, errlen, "%s needs a target of 2 blocks or more: it runs the first "
                         "and verifies with the rest (this one has %d)", d->name, c->n_layer);
    return 0;
}

// Blocks 0 .. L-1 of the target for T rows (pass rows from, from+1, ..) whose input rows are
// already embedded in g->state.x, at the target's slots first + from ..; the residuals they
// leave go to d->resid, where the verify pass starts them again.
static void exit_blocks(Draft *d, int from, int T, int first, const unsigned char *sees) {
    GPT *g = d->target;
    int C = g->config.n_embd;
    masked_blocks(g, 0, d->exit.layer, T, first + from, sees);
    memcpy(d->resid + (size_t)from * C, g->state.x, (size_t)T * C * sizeof(float));
}

// The root's level: the rerun window (after a restart) and current_token, causal. Each later
// level: its rows, masked. Both through blocks 0 .. L-1, then the exit's head per row.
static void exit_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo, const Sampler *s,
                      Rng *rng UNUSED) {
    GPT *g = d->target;
    int S = g->config.block_size, C = g->config.n_embd, hi = tb->rows;
    int first = tb->cache_len - tb->rerun; // the target's slot of the pass's first row
    int from = lo == 0 ? 0 : tb->rerun + lo; // the pass rows this level runs
    int T = lo == 0 ? tb->rerun + 1 : hi - lo;
    if (lo == 0) { // current_token and the window before it that a restart reruns
        causal_rows(tb, T, first, S);
        embed_at(g, text->tok + text->n - T, T, tb->positions);
    } else { // the level's nodes, each at cache_len + its depth
        mask_rows(tb, lo, hi, 0, S, tb->cache_len);
        embed_at(g, tb->token + lo, T, tb->positions);
    }
    exit_blocks(d, from, T, first, tb->sees);
    // the exit's head on the level's rows: the last hi - lo rows of the pass
    const float *x = g->state.x + (size_t)(T - (hi - lo)) * C;
    apply_head(exit_head(d), x, hi - lo, g->state.ln_f, g->state.logits);
    rows_from_logits(tb, lo, g->state.logits, (size_t)tb->V, s);
    tb->draft_ran = hi; // rows 0 .. hi-1 have their residual in d->resid, by pass row
    tb->draft_passes++;
}

// The verify pass, finished from what the draft left: blocks 0 .. L-1 for the pass rows the
// draft did not run (the last level's), then blocks L .. for every row from d->resid, then
// ln_f and lm_head. Its logits are the whole masked pass's, bit for bit (the self-test's
// greedy runs check it, and test_beyond against tree_forward).
static const float *exit_verify(Draft *d, GPT *g, TreeBuffers *tb) {
    int S = g->config.block_size, first = g->state.cache_len, T = tb->rerun + tb->rows;
    int done = tb->draft_ran > 0 ? tb->rerun + tb->draft_ran : 0; // pass rows the draft ran
    if (done < T) { // the rows no draft pass ran: through blocks 0 .. L-1 now
        embed_at(g, tb->all_tokens + done, T - done, tb->positions + done);
        exit_blocks(d, done, T - done, first, tb->sees + (size_t)done * S);
    }
    memcpy(g->state.x, d->resid, (size_t)T * g->config.n_embd * sizeof(float));
    masked_blocks(g, d->exit.layer, g->config.n_layer, T, first, tb->sees);
    g->state.cache_len += T; // as tree_forward: compact_kv_cache keeps the path's rows
    return apply_head(model_head(g), g->state.x, T, g->state.ln_f, g->state.logits);
}

// --- EAGLE: a head that drafts the target's features ---
//
// EAGLE (Li et al. 2024, arXiv:2401.15077) drafts the target's features: the residual row
// after its last block, the row ln_f reads. From the feature at position i and the embedding
// of the token at i+1, its Linear and block predict the feature at i+1, and the target's own
// frozen ln_f and lm_head turn that into q. EAGLE-3 (Li et al. 2025, arXiv:2503.01840) reads
// the rows after a low, a middle and the top block, fused into one, and its own output, fed
// back, stands for that fused row: a guess trained with the cross-entropy alone on its own
// unrolled guesses, not a feature to regress.
// EAGLE's row for position j reads [f_j, the embedding of token j+1], where f_j is the
// target's feature at j (the residual after its last block), and predicts f_(j+1), whose
// lm_head row is q for token j+2. So its row for current_token (at position P = cache_len)
// sits at ITS slot P-1 and reads f_(P-1), the feature of the token before it; each guess's
// row reads the feature its parent's row predicted. Its cache keeps only rows made from the
// target's true features (keep drops the rest), so each round first catches up on the rows
// whose features the last verify pass gave: the accepted path's.

// Row t of a pass's input: [feature, the target's embedding of token].
static void eagle_input(Draft *d, int t, const float *feature, int token) {
    int C = d->eagle.C;
    float *row = d->eagle_in + (size_t)t * 2 * C;
    memcpy(row, feature, (size_t)C * sizeof(float));
    memcpy(row + C, d->target->w.token_embedding + (size_t)token * C, (size_t)C * sizeof(float));
}

// EAGLE's pass over T input rows at its cache's next slots, each attending to the slots sees
// marks: the Linear, its block, then the target's own ln_f and lm_head, frozen. Its predicted
// features stay in the block's state.x; returns their (T, V) logits.
static const float *eagle_pass(Draft *d, int T, const unsigned char *sees) {
    EagleHead *e = &d->eagle;
    GPT *b = &e->block;
    int C = e->C;
    matmul(b->state.x, d->eagle_in, (Linear){e->fc_weight, e->fc_bias, 2 * C, C}, T);
    masked_blocks(b, 0, 1, T, b->state.cache_len, sees);
    b->state.cache_len += T;
    return apply_head(model_head(d->target), b->state.x, T, b->state.ln_f, b->state.logits);
}

// The feature EAGLE reads for the target's pass row i, into out (C): the top block's
// residual row (EAGLE), or the fused [low, middle, top] rows (EAGLE-3).
static void eagle_feature(const Draft *d, const GPT *g, int i, float *out) {
    const EagleHead *e = &d->eagle;
    size_t C = e->C, S = g->config.block_size;
    const float *top = g->state.x + i * C;
    if (e->n_feat == 1) {
        memcpy(out, top, C * sizeof(float));
        return;
    }
    float rows[3 * 4096]; // C <= 4096 (validate_config): [low, middle, top]
    memcpy(rows, d->taps + i * C, C * sizeof(float));
    memcpy(rows + C, d->taps + (S + i) * C, C * sizeof(float));
    memcpy(rows + 2 * C, top, C * sizeof(float));
    matmul(out, rows, (Linear){e->fuse_weight, e->fuse_bias, 3 * (int)C, (int)C}, 1);
}

// EAGLE-3's verify pass: the whole masked pass, run in three ranges of blocks, keeping the
// rows after the low and middle ones (the taps) that keep will fuse. EAGLE's is the plain
// pass: its feature is the top row, which the pass leaves anyway.
static const float *eagle_verify(Draft *d, GPT *g, TreeBuffers *tb) {
    int T = tb->rerun + tb->rows, S = g->config.block_size, C = g->config.n_embd;
    if (d->eagle.n_feat == 1) return tree_forward(g, tb->all_tokens, T, tb->positions, tb->sees);
    int first = g->state.cache_len, from = 0;
    embed_at(g, tb->all_tokens, T, tb->positions);
    for (int i = 0; i < 2; i++) { // the low and middle rows: the residual after their blocks
        masked_blocks(g, from, d->eagle.feat_layer[i], T, first, tb->sees);
        memcpy(d->taps + (size_t)i * S * C, g->state.x, (size_t)T * C * sizeof(float));
        from = d->eagle.feat_layer[i];
    }
    masked_blocks(g, from, g->config.n_layer, T, first, tb->sees);
    g->state.cache_len += T;
    d->taps_ready = 1;
    return apply_head(model_head(g), g->state.x, T, g->state.ln_f, g->state.logits);
}

// The head at in->path, or (path NULL) a zero head, for the self-test.
static int eagle_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    const Config *c = &in->target->config;
    size_t S = c->block_size, C = c->n_embd;
    float **bufs[] = {&d->feat, &d->pred, &d->eagle_in, &d->taps};
    if (alloc_each(bufs, (size_t[]){S * C, S * C, S * 2 * C, 2 * S * C}, 4) != 0)
        return fail_with(err, errlen, "out of memory for the eagle head");
    if (in->path) return load_eagle(in->path, in->target, &d->eagle, err, errlen);
    // zero weights: every row predicts the same feature, a fixed q
    Config one = {1, c->n_head, c->n_embd, c->block_size, c->vocab_size, c->ffn_width};
    d->eagle = (EagleHead){.C = (int)C, .n_feat = 1, .fc_weight = alloc_floats((2 * C + 1) * C)};
    d->eagle.fc_bias = d->eagle.fc_weight ? d->eagle.fc_weight + 2 * C * C : NULL;
    if (!d->eagle.fc_weight || build_gpt(&d->eagle.block, &one) != 0)
        return fail_with(err, errlen, "out of memory for the eagle head");
    return 0;
}

// After the prefill: the target's features of every prompt position, and an empty cache. At a
// window's restart the features of the rerun window's positions are the old window's rows of
// the same tokens (computed with more context: a draft's input may be anything), until the
// restart's verify pass gives the true ones; the cache empties.
static void eagle_restart(Draft *d, const GPT *g, int prefilled, int rerun) {
    size_t C = g->config.n_embd, S = g->config.block_size;
    // EAGLE-3: the prefill's plain pass left no taps, so its first round runs the window again
    // (a restart keeps the old window's features, whatever taps_ready says of them)
    if (prefilled > 0) d->taps_ready = d->eagle.n_feat == 1;
    for (int i = 0; i < prefilled && d->eagle.n_feat == 1; i++)
        eagle_feature(d, g, i, d->feat + i * C);
    if (rerun > 0) // new position j was old position j + S - rerun
        memmove(d->feat, d->feat + (S - rerun) * C, (size_t)rerun * C * sizeof(float));
    d->eagle.block.state.cache_len = 0;
}

// EAGLE-3's features of the prefill's window, positions 0 .. n-1 (text's tokens before
// current_token): the target's pass over them again, in ranges of blocks, with the taps
// kept. It writes the cache rows the prefill wrote, bit for bit: one pass a generation (or
// after a restart that came first), counted as drafting. The pass borrows tb's mask and
// positions, which every later pass of the round writes anew. Returns the passes it ran: 1.
static int eagle_prefill_taps(Draft *d, const TreeBuffers *tb, const Tokens *text, int n) {
    GPT *g = d->target;
    TreeBuffers rows = *tb; // the window's n tokens, causal, from slot 0
    rows.all_tokens = (int *)text->tok + text->n - 1 - n;
    rows.rows = n;
    rows.rerun = 0;
    int C = g->config.n_embd, saved = g->state.cache_len;
    causal_rows(&rows, n, 0, g->config.block_size);
    g->state.cache_len = 0;
    eagle_verify(d, g, &rows);
    g->state.cache_len = saved;
    for (int i = 0; i < n; i++) eagle_feature(d, g, i, d->feat + (size_t)i * C);
    d->taps_ready = 1;
    return 1;
}

// The root's level: catch up on the positions whose true features it has not run, the last
// one being current_token's row. Each later level: one masked pass over its rows, each
// reading its parent's predicted feature and its own token.
static void eagle_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo, const Sampler *s,
                       Rng *rng UNUSED) {
    GPT *b = &d->eagle.block;
    int C = d->eagle.C, S = b->config.block_size, hi = tb->rows, root = tb->cache_len - 1;
    int T = hi - lo;
    if (root < 0) { // a window of 2 or 3 restarts with current_token alone: nothing to read
        memset(tb->q, 0, (size_t)tb->V * sizeof(float)); // no guess: the round is a step
        memset(tb->own, 0, (size_t)tb->V * sizeof(float));
        return;
    }
    if (lo == 0 && !d->taps_ready) // EAGLE-3 after the prefill: the taps of its window
        tb->draft_passes += eagle_prefill_taps(d, tb, text, root + 1);
    if (lo == 0) { // rows root-lag .. root: the feature of position j, the token at j+1
        int lag = draft_lag(b, root);
        T = lag + 1;
        for (int t = 0; t < T; t++) // position j+1's token is text[n-1 - (root - j)]
            eagle_input(d, t, d->feat + (size_t)(root - lag + t) * C,
                        text->tok[text->n - 1 - (lag - t)]);
        causal_rows(tb, T, root - lag, S);
    } else { // row r reads the feature its parent's row predicted
        for (int r = lo; r < hi; r++)
            eagle_input(d, r - lo, d->pred + (size_t)tb->parent[r] * C, tb->token[r]);
        mask_rows(tb, lo, hi, 0, S, root);
    }
    const float *logits = eagle_pass(d, T, tb->sees);
    int out = T - (hi - lo); // the pass rows of this level's nodes: the last hi - lo
    memcpy(d->pred + (size_t)lo * C, b->state.x + (size_t)out * C, (hi - lo) * C * sizeof(float));
    rows_from_logits(tb, lo, logits + (size_t)out * tb->V, (size_t)tb->V, s);
    tb->draft_ran = hi;
    tb->draft_passes++;
}

// It keeps the target's features of the rows its verify pass ran and kept (the rerun window,
// current_token, the accepted guesses: g->state.x, the residual before ln_f) and drops its
// own rows made from predicted features: those past current_token's, or every row after a
// restart (they read the old window's features).
static void eagle_keep(Draft *d, const GPT *g, const TreeBuffers *tb, int m) {
    size_t C = g->config.n_embd, first = (size_t)(tb->cache_len - tb->rerun);
    for (int i = 0; i < tb->rerun; i++)
        eagle_feature(d, g, i, d->feat + (first + i) * C);
    for (int k = 0; k <= m; k++)
        eagle_feature(d, g, tb->rerun + tb->path[k], d->feat + (size_t)(tb->cache_len + k) * C);
    GPT *b = &d->eagle.block;
    int keep = tb->restarted ? 0 : tb->cache_len; // its slots 0 .. P-1 read true features
    if (b->state.cache_len > keep) trim_kv_cache(b, keep, 0);
}

// --- A staged cascade: the bigram drafts for the GPT draft, which drafts for the target ---
//
// Spector and Re, "Accelerating LLM Inference with Staged Speculative Decoding" (2023,
// arXiv:2308.04623). The GPT draft's guesses come from inner rounds of the blog's own loop,
// one level down: the bigram drafts, ONE pass of the GPT draft verifies, specdec.c's
// accept_reject keeps or redraws. Whatever the bigram guessed, what comes out of an inner
// round is distributed exactly as the GPT draft's own samples (accept_reject's identity), and
// the GPT draft's pass gave the row each came from. The outer rule needs nothing more: a
// guess drawn from q, and q's row. So both levels are exact. What it buys: the GPT draft
// runs one pass per inner round, not one per guess. In a tree the inner rounds draw only
// its trunk (tb->chosen takes their samples as first children); see cascade_chain.

// Reads the GPT draft and counts the bigram table.
static int cascade_setup(Draft *d, const DraftInputs *in, char *err, size_t errlen) {
    int S = in->block_size, V = d->V;
    if (gpt_setup(d, in, err, errlen) != 0 || bigram_setup(d, in, err, errlen) != 0) return -1;
    d->chain = calloc((size_t)S, sizeof(int));
    d->pass_in = calloc((size_t)S, sizeof(int));
    float **bufs[] = {&d->chain_q, &d->chain_own};
    int floats = alloc_each(bufs, (size_t[]){(size_t)S * V, (size_t)S * V}, 2);
    if (!d->chain || !d->pass_in || floats != 0 || build_spec_buffers(&d->inner, S, V) != 0)
        return fail_with(err, errlen, "out of memory for the cascade");
    return 0;
}

// One inner round: the bigram's k guesses after current, the GPT draft's one pass over [the
// tokens it lags, current, the guesses] with its served rows, accept/reject, trim. `in`
// holds the lag tokens and current (last), the GPT draft's cache ending just before them.
// Drafts want - made guesses; appends the tokens that come out, and their rows, at
// chain[made ..], never past chain[want - 1]; returns how many.
static int cascade_round(Draft *d, Tokens in, int made, int want, const Sampler *s, Rng *rng) {
    SpecBuffers *b = &d->inner;
    GPT *mid = &d->model;
    int V = d->V, lag = in.n - 1, k = want - made;
    int before = mid->state.cache_len + lag; // current's slot
    draft_tokens(&d->bigram, in.tok[lag], k, s->temperature, rng, b); // 1. the bigram guesses
    memcpy(d->pass_in, in.tok, (size_t)in.n * sizeof(int)); // 2. the GPT draft's one pass
    memcpy(d->pass_in + in.n, b->candidates, (size_t)k * sizeof(int));
    const float *logits = forward(mid, d->pass_in, in.n + k) + (size_t)lag * V;
    for (int i = 0; i <= k; i++)
        served_probs(b->target_probs + (size_t)i * V, logits + (size_t)i * V, V, s);
    int n = accept_reject(b, k, 1, rng); // 3. exact samples of the GPT draft
    n = n < want - made ? n : want - made; // a bonus is past the chain's end: dropped
    for (int i = 0; i < n; i++) { // token i came from the GPT draft's row i of this pass
        d->chain[made + i] = b->emitted[i];
        memcpy(d->chain_q + (size_t)(made + i) * V, b->target_probs + (size_t)i * V,
               (size_t)V * sizeof(float));
        tempered_softmax(d->chain_own + (size_t)(made + i) * V, logits + (size_t)i * V, V, 1.0f);
    }
    trim_kv_cache(mid, n, before); // 4. current and the guesses kept stay; the last token not
    return n;
}

// The round's chain, in inner rounds, into d->chain: the first child of each node of the
// tree's trunk, from the root down to its first node of several children, that one included
// (a chain is all trunk), as the room and the tokens wanted allow. Each level below has
// several rows, which take a masked pass of the GPT draft anyway, as --draft gpt's do. Then
// the GPT draft's cache_len is cache_len + chain_n: current_token and chain[0 .. chain_n-2].
static void cascade_chain(Draft *d, TreeBuffers *tb, const Tokens *text, const Sampler *s,
                          Rng *rng) {
    int want = 1; // the trunk's nodes: those of one child, then the first of several
    while (want < tb->shape.depth && tb->shape.width[want - 1] == 1) want++; // one child: on down
    want = want < tb->limit ? want : tb->limit;
    want = want < tb->room - 1 ? want : tb->room - 1;
    int lag = draft_lag(&d->model, tb->cache_len); // the catch-up rides in the first pass
    int made = 0; // the chain's guesses so far: each inner round adds one or more
    while (made < want) {
        Tokens in = {text->tok + text->n - 1 - lag, lag + 1}; // the first: the catch-up too
        if (made > 0) in = (Tokens){d->chain + made - 1, 1}; // then the chain's last guess
        made += cascade_round(d, in, made, want, s, rng);
        tb->draft_passes++; // one pass of the GPT draft an inner round
    }
    d->chain_n = made;
}

// The root's level makes the chain (cascade_chain). Each level of the trunk is one row, row
// j at depth j (every level above it has one node): its q is chain_q[j], the row the inner
// round drew chain[j], its first child, from; its keys and values are where the inner round
// left them, at slot cache_len + j, the tree's slot for row j. Each level below the trunk,
// the first at lo == chain_n, is drafted as --draft gpt drafts it: one masked pass.
static void cascade_rows(Draft *d, TreeBuffers *tb, const Tokens *text, int lo, const Sampler *s,
                         Rng *rng) {
    int V = tb->V, hi = tb->rows, j = tb->depth[lo];
    if (lo == 0) cascade_chain(d, tb, text, s, rng);
    if (j >= d->chain_n) { // below the trunk: its cache holds rows 0 .. lo-1, by row
        GPT *mid = &d->model;
        mask_rows(tb, lo, hi, 0, mid->config.block_size, tb->cache_len);
        const float *logits = tree_forward(mid, tb->token + lo, hi - lo, tb->positions, tb->sees);
        rows_from_logits(tb, lo, logits, (size_t)V, s);
        tb->draft_passes++;
    } else { // the trunk: the inner round's row, and its sample as the first child
        memcpy(tb->q + (size_t)lo * V, d->chain_q + (size_t)j * V, (size_t)V * sizeof(float));
        memcpy(tb->own + (size_t)lo * V, d->chain_own + (size_t)j * V, (size_t)V * sizeof(float));
        tb->chosen[lo] = d->chain[j];
    }
    tb->draft_ran = hi; // rows 0 .. hi-1 sit in its cache, by row (in the trunk, and more)
}

// --- Every draft, named once: --draft, -h, the self-test and the checks read this table ---

// Columns: name, file, untrained name, about, sure, no_tree, no_p_min; then the hooks
// setup, restart, rows, verify and keep.
static const DraftKind DRAFTS[] = {
    {"bigram", NULL, NULL, "the blog's table, counted from the training split (the default)",
     0, NULL, NULL, bigram_setup, NULL, bigram_rows, NULL, NULL},
    {"lookup", NULL, NULL, "copies what followed an earlier occurrence of the text's ending "
     "(-p of 3 or more characters)", 1, "lookup copies one continuation",
     "lookup's copies have no chance below 1 to compare", NULL, NULL, lookup_rows, NULL, NULL},
    {"gpt", DEFAULT_DRAFT, NULL, "a small GPT distilled from the target, with its own KV cache",
     0, NULL, NULL, gpt_setup, gpt_restart, gpt_rows, NULL, gpt_keep},
    {"medusa", DEFAULT_MEDUSA, "medusa0", "heads on the target's hidden row, one per level",
     0, NULL, "medusa drafts every level at once from its heads", medusa_setup, medusa_restart,
     medusa_rows, NULL, medusa_keep},
    {"early-exit", DEFAULT_EXIT, "early-exit0", "the target's first block, then a trained head; "
     "one KV cache", 0, NULL, NULL, exit_setup, NULL, exit_rows, exit_verify, NULL},
    {"early-exit-untrained", NULL, NULL, "the target's first block, then its own ln_f and "
     "lm_head", 0, NULL, NULL, exit_setup, NULL, exit_rows, exit_verify, NULL},
    {"eagle", DEFAULT_EAGLE, "eagle0", "drafts the target's features: a Linear and one block",
     0, NULL, NULL, eagle_setup, eagle_restart, eagle_rows, eagle_verify, eagle_keep},
    {"cascade", DEFAULT_DRAFT, NULL, "the bigram drafts for the gpt draft, which drafts for "
     "the target", 0, NULL, NULL, cascade_setup, gpt_restart, cascade_rows, NULL, gpt_keep},
};
#define N_DRAFTS (int)(sizeof(DRAFTS) / sizeof(DRAFTS[0]))

// The kind --draft names, or NULL (then --draft is a checkpoint's path: a gpt draft).
const DraftKind *find_draft(const char *name) {
    for (int i = 0; i < N_DRAFTS; i++)
        if (!strcmp(DRAFTS[i].name, name)) return &DRAFTS[i];
    return NULL;
}

// Builds a draft of this kind from in (in->path NULL: its untrained form). 0, or -1 with err.
int setup_kind(const DraftKind *kind, const DraftInputs *in, Draft *d, char *err, size_t errlen) {
    *d = (Draft){.kind = kind, .name = kind->name, .path = in->path, .V = in->v->size,
                 .target = in->target}; // its file: a setup that defaults one says which
    return kind->setup ? kind->setup(d, in, err, errlen) : 0; // lookup has nothing to build
}

// Builds the draft --draft names, from its own file; a name no kind has is a checkpoint's
// path, a gpt draft. 0, or -1 with err set.
int setup_draft(const char *name, const DraftInputs *in, Draft *d, char *err, size_t errlen) {
    const DraftKind *kind = find_draft(name);
    DraftInputs mine = *in;
    mine.path = kind ? kind->file : name;
    return setup_kind(kind ? kind : find_draft("gpt"), &mine, d, err, errlen);
}

// Frees what setup_draft built; safe on a zeroed Draft, and twice.
void free_draft(Draft *d) {
    free_bigram_draft(&d->bigram);
    free_gpt(&d->model);
    free_medusa(&d->medusa);
    free(d->exit.ln_weight); // the exit's other arrays are in the same allocation
    free(d->eagle.fuse_weight ? d->eagle.fuse_weight : d->eagle.fc_weight); // the rest too
    free_gpt(&d->eagle.block);
    free_spec_buffers(&d->inner);
    free_all((void *[]){d->hidden, d->resid, d->feat, d->pred, d->eagle_in, d->taps, d->chain,
                        d->chain_q, d->chain_own, d->pass_in}, 10);
    memset(d, 0, sizeof(*d));
}

// ----------------------------------------------------------------------------
// The tree's phases: grow it, verify it in one pass, judge it, trim the cache
//
// The four phases of specdec.c's round, for a tree and any draft: draft_tree asks the draft
// for each level's rows and draws the children; verify_tree runs the one masked pass (or
// lets the draft finish the pass it began); accept_reject_tree walks down the tree with the
// exact rule; compact_kv_cache moves the accepted path's rows into place.

// Phase 1 for a tree: grows it level by level from current_token, width[level] children per
// node, while the window has room (slots up to S-1) and the path could still be used. A
// chain (width 1) also stops after a guess the draft itself gives less than --draft-p-min.
// Returns -1; or the row whose q or own is not finite, where the tree stopped growing.
static int draft_tree(Draft *d, TreeBuffers *tb, const Tokens *text, const Sampler *s, Rng *rng) {
    int room = tb->room, V = tb->V; // rows that fit: tree_round counts the cache's free slots
    tb->rows = 1; // the root, current_token
    tb->token[0] = text->tok[text->n - 1];
    tb->parent[0] = -1;
    tb->depth[0] = 0;
    tb->n_children[0] = 0;
    tb->draft_ran = 0;
    tb->draft_passes = 0;
    tb->stopped = 0;
    if (!d) return -1; // plain decoding: the root alone, a one-token step
    int lo = 0; // the first row of the level being grown
    for (int level = 0; level < tb->shape.depth && level < tb->limit; level++) {
        int hi = tb->rows;
        if (hi >= room) break; // no slot left for a child
        for (int r = lo; r < hi; r++) tb->chosen[r] = -1; // unless the draft draws them
        d->kind->rows(d, tb, text, lo, s, rng); // the draft's row after each node
        for (int r = lo; r < hi; r++) {
            float *q = tb->q + (size_t)r * V, *own = tb->own + (size_t)r * V;
            if (tb->top) memcpy(q, own, (size_t)V * sizeof(float)); // ranked by the draft's own row
            if (first_nonfinite(q, 1, V) >= 0 || first_nonfinite(own, 1, V) >= 0) return r;
        }
        for (int r = lo; r < hi; r++) add_children(tb, r, tb->shape.width[level], room, rng);
        if (tb->rows == hi) break; // no child was added: the tree is done
        int last = tb->rows - 1; // a chain's one new guess, and its own chance
        float own = tb->own[(size_t)tb->parent[last] * tb->V + tb->token[last]];
        tb->stopped = own < d->p_min; // --draft-p-min: unsure, so stop after this guess
        if (tb->stopped) break;
        lo = hi;
    }
    return -1;
}

// Phase 2 for a tree: ONE target pass over current_token and every row (after the tokens a
// restart reruns, a chain from slot 0), each row attending to the context and its own
// ancestors; p[r] = the served row after row r. A draft that ran part of it finishes it.
// Returns -1, or the first row whose p is not finite (tempered_softmax made it NaN).
static int verify_tree(GPT *g, Draft *d, TreeBuffers *tb, const int *current, const Sampler *s) {
    int V = tb->V, rerun = tb->rerun, S = g->config.block_size, T = rerun + tb->rows;
    for (int i = 0; i < rerun; i++) tb->all_tokens[i] = current[i - rerun]; // the window
    for (int r = 0; r < tb->rows; r++) tb->all_tokens[rerun + r] = tb->token[r];
    causal_rows(tb, rerun, g->state.cache_len, S); // the rerun window: causal
    mask_rows(tb, 0, tb->rows, rerun, S, tb->cache_len); // current_token and the guesses
    const float *logits = d && d->kind->verify ? d->kind->verify(d, g, tb)
                          : tree_forward(g, tb->all_tokens, T, tb->positions, tb->sees);
    for (int r = 0; r < tb->rows; r++)
        served_probs(tb->p + (size_t)r * V, logits + (size_t)(rerun + r) * V, V, s);
    return first_nonfinite(tb->p, tb->rows, V);
}

// p := norm(max(p - Q, 0)), in place, in double: what is left of p for the next sibling
// once a child drawn from Q was rejected. Unchanged if nothing is left (p == Q).
static void subtract_and_normalise(double *p, const double *Q, int V) {
    double mass = 0.0;
    for (int x = 0; x < V; x++) mass += fmax(0.0, p[x] - Q[x]);
    if (mass <= 0.0) return; // p == Q up to rounding: the next child faces p itself
    for (int x = 0; x < V; x++) p[x] = fmax(0.0, p[x] - Q[x]) / mass;
}

// Q := Q without token x, renormalised: the row the next sibling was drawn from, when the
// children are drawn without replacement.
static void remove_token(double *Q, int x, int V) {
    Q[x] = 0.0;
    double mass = 0.0; // summed, not 1 - Q[x]: the shares the next draw really has
    for (int y = 0; y < V; y++) mass += Q[y];
    for (int y = 0; y < V; y++) Q[y] = mass > 0.0 ? Q[y] / mass : 0.0;
}

// Loads row r's p and q into the working rows, in double and normalised (a float row sums
// to 1 +- 1e-7, and the draws use its true shares): the (p, Q) its first child faces.
static void start_node(TreeBuffers *tb, int r) {
    int V = tb->V;
    double p_sum = 0.0, q_sum = 0.0;
    for (int x = 0; x < V; x++) {
        p_sum += tb->p[(size_t)r * V + x];
        q_sum += tb->q[(size_t)r * V + x];
    }
    for (int x = 0; x < V; x++) {
        tb->p_work[x] = tb->p[(size_t)r * V + x] / p_sum;
        tb->Q_work[x] = tb->q[(size_t)r * V + x] / q_sum;
    }
}

// The chance that child c passes: min(1, p(x)/Q(x)) for its token x, against the (p, Q) it
// faces. A top child is a sure guess: Q_work becomes one-hot at x first.
static double child_chance(TreeBuffers *tb, int c) {
    int x = tb->token[c];
    if (tb->top)
        for (int y = 0; y < tb->V; y++) tb->Q_work[y] = y == x;
    return fmin(1.0, tb->p_work[x] / tb->Q_work[x]); // Q(x) > 0: x was drawn from Q
}

// After child c failed: p := norm(max(p - Q, 0)), what the next sibling is judged against
// (p(x) < Q(x) for a failed x, so x gets 0), and Q := Q without x, the row the next sibling
// was really drawn from (without replacement; a top child's Q is child_chance's one-hot).
static void reject_child(TreeBuffers *tb, int c) {
    subtract_and_normalise(tb->p_work, tb->Q_work, tb->V);
    if (!tb->top) remove_token(tb->Q_work, tb->token[c], tb->V);
}

// The exact rule at one node (row r): its children are tried in order, each passing with
// child_chance; a failure updates (p, Q) for the next (reject_child). Returns the accepted
// child's row, or -1 when all failed, with *token drawn from the p left over. Why it is
// exact: each child faces a (p, Q) for which accept_reject's identity holds (min(p, Q)
// kept plus max(0, p - Q) redrawn is p), so "this child, else a draw from what is left"
// emits that p; by induction over the siblings, the node's own p (notes/math.md, section 11).
// With one child it is specdec.c's accept_reject at one position.
static int judge_children(TreeBuffers *tb, int r, Rng *rng, int *token) {
    start_node(tb, r);
    for (int c = tb->first_child[r]; c < tb->first_child[r] + tb->n_children[r]; c++) {
        tb->chance[c] = child_chance(tb, c);
        tb->u[c] = rng_uniform(rng);
        if (tb->u[c] < tb->chance[c]) {
            tb->verdict[c] = 'A';
            return c;
        }
        tb->verdict[c] = 'R';
        reject_child(tb, c);
    }
    *token = sample_weights(tb->p_work, tb->V, rng_uniform(rng)); // from what is left of p
    return -1;
}

// Phase 3 for a tree: walks down from current_token, judging each node's children, until a
// node's children all fail (a draw from its leftover p ends the round) or a leaf passes
// (a bonus from its p, unless the path already gives every token still wanted). Writes the
// tokens to tb->emitted and the path to tb->path; returns how many tokens: 1 .. depth+1.
static int accept_reject_tree(TreeBuffers *tb, Rng *rng) {
    int r = 0, m = 0; // the node reached, and the guesses accepted on the way
    tb->path[0] = 0;
    tb->passed = 0;
    while (tb->n_children[r] > 0) {
        int token = -1; // set by judge_children when every child fails
        int c = judge_children(tb, r, rng, &token);
        if (c < 0) { // every child failed: the leftover draw is the round's last token
            tb->emitted[m] = token;
            return m + 1;
        }
        tb->emitted[m++] = tb->token[c];
        tb->path[m] = c;
        tb->passed = m;
        r = c;
    }
    if (m == tb->limit) return m; // the last round: no bonus past the tokens wanted
    tb->emitted[m] = sample_from(tb->p + (size_t)r * tb->V, tb->V, rng_uniform(rng));
    return m + 1; // a leaf passed (or the root had no child): its p came with the pass
}

// Phase 4 for a tree: the rows of the path's first m guesses (every token the round emits
// but its last, as in a chain) move into the slots right after current_token, in order, and
// the cache keeps current_token and them: trim_kv_cache's invariant. A node's keys depend
// on its position and ancestors only, both unchanged by the move. Moving slot path[d] down
// to cache_len + d never overwrites a row still to be moved: those sit in later slots. (The
// draft keeps what it needs of the path itself: its kind's keep.)
static void compact_kv_cache(GPT *g, const TreeBuffers *tb, int m) {
    for (int d = 1; d <= m; d++) move_cache_row(g, tb->cache_len + tb->path[d], tb->cache_len + d);
    trim_kv_cache(g, 1 + m, tb->cache_len);
}

// ----------------------------------------------------------------------------
// Stats, colours and the trace of a tree round

// The kinds of target pass, as the stats count and time them (RunStats.pass).
typedef enum {
    PASS_PREFILL, // the prompt's last S tokens from position 0: each decoder, once
    PASS_REFILL,  // plain decoding, cache full: the last S/2 tokens again, from position 0
    PASS_FOLDED,  // speculative, cache full: those S/2 tokens, then the guesses: one pass
    PASS_VERIFY,  // speculative: current_token and its guesses on top of the cache
    PASS_STEP,    // one token on top of the cache: plain decoding's steps, and speculative
                  // rounds with no guess (the cache's last slot, or lookup found nothing)
    N_PASS_KINDS
} PassKind;

static const char *const PASS_NAME[N_PASS_KINDS] = {"prefill", "refill", "verify + refill",
                                                    "verify", "one-token step"};

// How many target passes of one kind, or one size, ran, their tokens and their wall time.
typedef struct {
    long passes, tokens; // tokens: the sum of T over those passes
    double seconds;      // a verify pass's time includes its served rows
} PassTally;

#define POSITIONS 16  // depths whose acceptance is counted one by one
#define PASS_SIZES 65 // pass sizes T = 1..63 tallied one by one; the last slot pools T >= 64

// A generation's counters: specdec.c's Stats, and where the time went.
typedef struct {
    Stats core;                  // rounds, drafted, judged, accepted, alpha, passes, wall time
    PassTally pass[N_PASS_KINDS]; // the target's passes by kind: the cost speculation cuts
    PassTally size[PASS_SIZES];   // the same passes by their size T: c(T)
    long judged_at[POSITIONS];   // judged_at[i]: rounds that judged a child at depth i+1 (the
    long accepted_at[POSITIONS]; // last slot pools the rest), and that accepted one
    long empty_rounds;           // rounds whose draft, with room, proposed nothing (lookup)
    long levels;                 // the levels drafted, summed over the rounds
    long cut_rounds;             // rounds whose tree the window cut: fewer free slots than
                                 // the shape's rows, so that some guesses found no slot
    long draft_passes;           // forward passes of a model draft (a table or lookup makes none)
    double draft_seconds;        // wall time spent drafting
    int tree;                    // 1: a level of 2 or more: the chain's formulas fail
    const char *nonfinite_file;  // a run stopped at a row not finite: NULL, the target's; or
                                 // the draft's file, whose row it was
} RunStats;

// Adds a target pass of T tokens, `seconds` long, to its kind's and its size's tallies.
static void tally_pass(RunStats *st, PassKind kind, int T, double seconds) {
    PassTally *t[2] = {&st->pass[kind], &st->size[T < PASS_SIZES - 1 ? T : PASS_SIZES - 1]};
    for (int i = 0; i < 2; i++) // one more pass, of T tokens, taking `seconds`
        *t[i] = (PassTally){t[i]->passes + 1, t[i]->tokens + T, t[i]->seconds + seconds};
}

// Counts a tree round: its pass (and kind), the draft's passes and time, and by depth, the
// nodes whose children were judged and whether one passed (judged_at, accepted_at).
// alpha: each judged node's first child's chance, sum min(p, q) (a sure child's: p(x)).
static void count_tree_round(RunStats *st, const Draft *d, const TreeBuffers *tb, int n,
                             double draft_seconds, double verify_seconds) {
    int nodes = tb->rows - 1;
    PassKind kind = tb->restarted ? (nodes > 0 ? PASS_FOLDED : PASS_REFILL)
                                  : nodes > 0 ? PASS_VERIFY : PASS_STEP;
    int core = d ? VERIFY_PASS : kind == PASS_REFILL ? REFILL_PASS : STEP_PASS; // a round verifies
    count_pass(&st->core, core, verify_seconds); // (specdec.c's kinds; plain decoding has no d)
    tally_pass(st, kind, tb->rerun + tb->rows, verify_seconds);
    if (d) st->draft_seconds += draft_seconds; // plain decoding drafts nothing
    st->draft_passes += tb->draft_passes; // a model draft's passes: one a level it grew
    if (tb->shape.depth == 0) return; // plain decoding: a step, not a round
    int judged = tb->passed + (n > tb->passed && tb->n_children[tb->path[tb->passed]] > 0);
    for (int i = 0; i < judged; i++) { // depth i+1: the children of path[i] were judged
        int r = tb->path[i], x = tb->token[tb->first_child[r]]; // x: the node's first child
        const float *p = tb->p + (size_t)r * tb->V, *q = tb->q + (size_t)r * tb->V;
        st->core.alpha_sum += tb->top ? p[x] : expected_acceptance(p, q, tb->V); // sure: p(x)
        int slot = i < POSITIONS ? i : POSITIONS - 1;
        st->judged_at[slot]++;
        st->accepted_at[slot] += i < tb->passed;
    }
    st->core.resampled += judged > tb->passed; // all of a node's children failed
    st->core.bonus += n > tb->passed && judged == tb->passed && nodes > 0;
    st->empty_rounds += nodes == 0 && tb->room > 1; // room for a guess, and none proposed
    st->levels += tb->depth[tb->rows - 1]; // the deepest row's depth: the levels drafted
    st->cut_rounds += tb->room < tb->max_rows && tb->rows == tb->room; // no slot for more
    st->core.rounds++;
    st->core.drafted += nodes;
    st->core.judged += judged;
    st->core.guesses_accepted += tb->passed;
    st->core.round_tokens += n;
}

// Where an emitted token came from; --color shows it on the terminal.
typedef enum {
    FROM_TARGET,    // sampled from a target pass: prefill, plain decoding, or a round with no guess
    FROM_ACCEPTED,  // a draft token that passed u < min(1, p/q)
    FROM_RESAMPLED, // drawn from what was left of p after a rejection
    FROM_BONUS,     // drawn from the last node's p after its path passed
    N_SOURCES
} TokenSource;

// Where and how a generation's text streams.
typedef struct {
    FILE *stream;          // where each token is written as it is decided, or NULL
    unsigned char *source; // (length of seq) NULL, or source[i]: seq[i]'s TokenSource
    int color;             // write with one ANSI colour per TokenSource (needs source)
} Output;

// ANSI colours of the token sources, and their names for the legend.
static const char *const SOURCE_COLOR[N_SOURCES] = {"\033[35m", "\033[32m", "\033[33m", "\033[36m"};
static const char *const SOURCE_NAME[N_SOURCES] = {"target sample", "accepted draft",
                                                   "resampled", "bonus"};

// Writes n tokens as text; with color, each in its source's colour (a newline uncoloured).
void write_text(FILE *f, const Vocab *v, const int *toks, const unsigned char *source, int n,
                int color) {
    int current = -1; // the colour now in force, -1 for none
    for (int i = 0; i < n; i++) {
        unsigned char ch = decode(v, toks[i]);
        int want = color && source && ch != '\n' ? source[i] : -1; // newlines stay uncoloured
        if (want != current) fputs(want >= 0 ? SOURCE_COLOR[want] : "\033[0m", f);
        current = want;
        fputc(ch, f);
    }
    if (current >= 0) fputs("\033[0m", f);
}

// How a generation of the one loop is run.
typedef struct {
    int max_new_tokens; // tokens to generate after the prompt
    Sampler sampler;    // the served distribution: temperature (0 = greedy), top-k, top-p
    int trace;          // print the prefill and every round on stderr
    const Vocab *vocab; // for the trace and the output
    Output *out;        // where the text streams as it is made, or NULL
    Rng *rng;           // the random stream: every draw of the generation, in order
    RunStats *st;       // the generation's counters
} RunOptions;

// Records where seq[from .. from+n-1] came from, and writes them to the stream, if any.
static void show_colored(const RunOptions *o, const int *seq, int from, int n, TokenSource src) {
    Output *out = o->out;
    if (!out || n <= 0) return; // nobody asked: a test, the bench, the self-test
    if (out->source) memset(out->source + from, src, (size_t)n);
    if (!out->stream || !o->vocab) return;
    write_text(out->stream, o->vocab, seq + from, out->source ? out->source + from : NULL, n,
               out->color);
    fflush(out->stream); // each token shows as it is decided
}

// Prints row r (a guess) under its parent, with its q and p and its verdict, then its
// children: the tree drawn depth-first, indented by depth.
static void trace_node(const TreeBuffers *tb, const Vocab *v, int r) {
    if (r > 0) {
        char vis[8];
        int x = tb->token[r], par = tb->parent[r];
        visible_char(vis, decode(v, x));
        fprintf(stderr, "  %*s%-6s q=%.3f p=%.3f", 2 * tb->depth[r], "", vis,
                tb->q[(size_t)par * tb->V + x], tb->p[(size_t)par * tb->V + x]);
        if (tb->verdict[r] == '.')
            fprintf(stderr, "  not judged\n");
        else
            fprintf(stderr, "  chance=%.3f u=%.3f %s\n", tb->chance[r], tb->u[r],
                    tb->verdict[r] == 'A' ? "ACCEPT" : "REJECT");
    }
    for (int c = tb->first_child[r]; c < tb->first_child[r] + tb->n_children[r]; c++)
        trace_node(tb, v, c);
}

// Prints one tree round: the rows, the verdicts, what the round emitted and kept.
static void trace_tree(const RunOptions *o, const TreeBuffers *tb, int n) {
    char vis[8];
    int depth = tb->depth[tb->rows - 1]; // the last row is among the deepest
    visible_char(vis, decode(o->vocab, tb->token[0]));
    fprintf(stderr, "\ntree round %ld: current_token %s at slot %d, %d guesses in %d level%s\n",
            o->st->core.rounds, vis, tb->cache_len, tb->rows - 1, depth, depth == 1 ? "" : "s");
    if (tb->restarted) // the cache was full: the pass reruns the window first
        fprintf(stderr, "  RESTART the window restarts: the pass reruns %d tokens first\n",
                tb->rerun);
    if (tb->stopped) // --draft-p-min ended the chain
        fprintf(stderr, "  (the draft stopped after guess %d: its own chance was below "
                "--draft-p-min)\n", tb->rows - 1);
    if (tb->rows > 1) // else current_token sits in the last slot: RESULT says a plain step
        fprintf(stderr, "  VERIFY  one target pass over %d tokens, each guess seeing its "
                "ancestors only\n  ACCEPT/REJECT children in order, each when u < chance = "
                "min(1, p/Q); q and p are the rows' own, and a later sibling faces p and Q after "
                "the earlier ones\n", tb->rerun + tb->rows);
    trace_node(tb, o->vocab, 0);
    int drew = tb->n_children[tb->path[tb->passed]] > 0; // the last node's children all failed
    fprintf(stderr, "  RESULT  %d passed, then %s: %d token%s from 1 target pass\n", tb->passed,
            n == tb->passed ? "nothing more (every token wanted is there)"
            : tb->rows == 1 ? "a plain step from p (no guess)"
            : drew ? "a draw from the p left over" : "a bonus from the leaf's p",
            n, n == 1 ? "" : "s");
    if (n > 1) // the tokens emitted but the last are cached: compact_kv_cache's m
        fprintf(stderr, "  TRIM    the path's rows move to slots %d..%d; cache_len -> %d\n",
                tb->cache_len + 1, tb->cache_len + n - 1, tb->cache_len + n);
    else
        fprintf(stderr, "  TRIM    no row to move; cache_len -> %d\n", tb->cache_len + 1);
}

// Prints where a generation's wall time went: each kind of target pass, drafting, the rest.
static void print_time_table(const RunStats *s, int speculative) {
    double sec = s->core.seconds, wall = sec > 0 ? sec : 1.0, rest = sec - s->draft_seconds;
    fprintf(stderr, "  where the time went     passes   tokens         ms   share\n");
    for (int i = 0; i < N_PASS_KINDS; i++) {
        const PassTally *t = &s->pass[i];
        rest -= t->seconds;
        if (t->passes == 0) continue; // a kind this decoder did not run
        fprintf(stderr, "    %-19s %7ld  %7ld  %9.3f  %5.1f%%\n", PASS_NAME[i], t->passes,
                t->tokens, 1e3 * t->seconds, 100.0 * t->seconds / wall);
    }
    if (speculative) // a model draft's passes; a table or lookup drafts without one
        fprintf(stderr, "    %-19s %7ld  %7ld  %9.3f  %5.1f%%   (draft passes, guesses)\n",
                "drafting", s->draft_passes, s->core.drafted, 1e3 * s->draft_seconds,
                100.0 * s->draft_seconds / wall);
    fprintf(stderr, "    %-19s %7s  %7s  %9.3f  %5.1f%%   (sampling, accept/reject, "
            "bookkeeping)\n", "the rest", "", "", 1e3 * rest, 100.0 * rest / wall);
}

// Prints a generation's counters: specdec.c's (a tree's without the chain's formula), then
// a tree's own lines, acceptance by depth, and where the time went.
void print_run_stats(const char *title, const RunStats *s, int speculative, int K) {
    const Stats *c = &s->core;
    print_stats(title, c, speculative && !s->tree);
    if (speculative && s->tree) { // the chain's formula does not hold: the counts alone
        fprintf(stderr, "  rounds                  %ld   (%.2f guesses a round)\n", c->rounds,
                ratio(c->drafted, c->rounds));
        fprintf(stderr, "  accepted                %ld of the %ld positions judged (%.3f); "
                "alpha %.3f, averaged over those positions\n", c->guesses_accepted, c->judged,
                ratio(c->guesses_accepted, c->judged), stats_alpha(c));
        fprintf(stderr, "  tokens per verify pass  %.3f   (notes/speed.md measures a tree's)\n",
                ratio(c->round_tokens, c->rounds));
        // what the 32-slot window leaves of the shape: a tree's rows need free slots
        fprintf(stderr, "  levels drafted          %.2f a round (the shape has %d); the window "
                "cut %ld of %ld rounds (fewer free slots than the shape's rows)\n",
                ratio(s->levels, c->rounds), K, s->cut_rounds, c->rounds);
    }
    if (speculative) { // the rate at which depth i passed among the rounds that judged it
        fprintf(stderr, "  acceptance by position ");
        for (int i = 0; i < K && i < POSITIONS; i++) // "-": never reached (the rate unused)
            fprintf(stderr, s->judged_at[i] ? " %d:%.2f" : " %d:-", i + 1,
                    ratio(s->accepted_at[i], s->judged_at[i]));
        fprintf(stderr, "%s   (guess i passes, given 1 .. i-1 did)\n", K > POSITIONS ? "+" : "");
    }
    if (s->empty_rounds > 0) // only prompt lookup ever drafts nothing
        fprintf(stderr, "  rounds with no guess    %ld   (prompt lookup found no match: "
                "a plain step)\n", s->empty_rounds);
    print_time_table(s, speculative);
}

// The speedup model with the draft's cost: E tokens a verify pass over c(K+1) + K * c_draft;
// with c(K+1) = 1 and c_draft = 0 it is the papers' count of passes.
double predicted_speedup(double alpha, int K, double c_verify, double c_draft) {
    return expected_tokens_per_pass(alpha, K) / (c_verify + K * c_draft);
}

// A token's cost, in one-token passes of `unit` seconds: kind i's in cost[i], drafting's last.
static double cost_per_token(const RunStats *s, double unit, double cost[N_PASS_KINDS + 1]) {
    double n = s->core.emitted > 0 ? (double)s->core.emitted : 1.0, sum = 0.0;
    for (int i = 0; i <= N_PASS_KINDS; i++) {
        double sec = i < N_PASS_KINDS ? s->pass[i].seconds : s->draft_seconds;
        cost[i] = sec / unit / n; // each pass at its measured c(T), over the tokens
        sum += cost[i];
    }
    return sum;
}

// Prints, after specdec.c's comparison, what the passes of this run cost: c(T), each kind's
// cost per token, and two accountings of the speedup. Both are priced from this run's own
// measured passes (and, for the papers' formula, its alpha): they account for the run, and
// forecast nothing; test/bench measures c(T) apart and forecasts (notes/speed.md).
void print_accounting(const RunStats *spec, const RunStats *plain, int K) {
    // the unit of cost: one one-token pass of plain decoding; c(T) = a T-token pass in it
    double unit = ratio(plain->pass[PASS_STEP].seconds, plain->pass[PASS_STEP].passes);
    if (unit == 0.0) { // no one-token step to measure by: -n 1 decodes none
        fprintf(stderr, "  (no one-token pass of plain decoding to price the others by)\n");
        return;
    }
    fprintf(stderr, "  c(T), a T-token pass over a one-token pass, as measured here:");
    for (int T = 1; T < PASS_SIZES; T++) {
        long n = spec->size[T].passes + plain->size[T].passes;
        if (n > 0) // the sizes either decoder ran; the last slot pools the larger ones
            fprintf(stderr, " %d%s:%.2f", T, T == PASS_SIZES - 1 ? "+" : "",
                    (spec->size[T].seconds + plain->size[T].seconds) / n / unit);
    }
    double cs[N_PASS_KINDS + 1], cp[N_PASS_KINDS + 1];
    double spec_cost = cost_per_token(spec, unit, cs), plain_cost = cost_per_token(plain, unit, cp);
    fprintf(stderr, "\n  cost per token, in one-token passes\n");
    for (int i = 0; i <= N_PASS_KINDS; i++) {
        if (cs[i] == 0.0 && cp[i] == 0.0) continue; // neither decoder spent anything here
        fprintf(stderr, "    %-19s %11.3f  %11.3f\n", i < N_PASS_KINDS ? PASS_NAME[i] :
                "drafting", cs[i], cp[i]);
    }
    fprintf(stderr, "    %-19s %11.3f  %11.3f  %11.3f\n", "every pass", spec_cost,
            plain_cost, spec_cost / plain_cost);
    double measured = ratio(plain->core.seconds, spec->core.seconds);
    fprintf(stderr, "  speedup              %6.3fx: speculative decoding took %.3f times "
            "plain decoding's wall time\n", measured, ratio(1.0, measured));
    fprintf(stderr, "  accounting           %6.3fx: a token cost %.3f one-token passes against "
            "%.3f, summing the passes that ran at their c(T) (an account of this run, not a "
            "forecast)\n", plain_cost / spec_cost, spec_cost, plain_cost);
    // the papers' formula: a verify pass of K+1 tokens and K guesses per round
    const PassTally *full = &spec->size[K + 1 < PASS_SIZES ? K + 1 : PASS_SIZES - 1];
    double c_verify = ratio(full->seconds, full->passes) / unit;
    double c_draft = ratio(spec->draft_seconds, spec->core.drafted) / unit;
    double textbook = predicted_speedup(stats_alpha(&spec->core), K, c_verify, c_draft);
    if (spec->tree) // its passes hold a tree's nodes, not K+1 tokens of a chain
        fputs("  papers' formula      (a chain's: notes/speed.md measures a tree's)\n", stderr);
    else if (c_verify == 0.0) // c(K+1) unmeasured: no round drafted all K guesses
        fprintf(stderr, "  papers' formula      (no round drafted K guesses to price it by)\n");
    else
        fprintf(stderr, "  papers' formula      %6.3fx: E/(c(K+1) + K c_draft), with this run's "
                "alpha and c(K+1), prices a token at %.3f; it leaves out the prefill, the refills "
                "and the rounds the cache or the text cut short\n", textbook, 1.0 / textbook);
}

// ----------------------------------------------------------------------------
// The one loop: tree_round and tree_generate
//
// specdec.c's speculative_generate runs the blog's chain. This loop runs any draft and any
// shape: the tree 1,1,..,1 is that chain, drawing the same uniforms in the same order, and
// the shape of no levels is plain decoding, drawing as generate does (the self-test compares
// the texts of both, sampled, at a fixed seed).

// The context rule at a round's start, folded: when the cache is full, the window restarts
// from the last S/2 tokens, current_token last, where plain decoding refills; instead of a
// pass of its own (specdec.c's refill_cache), the round's verify pass reruns the S/2-1
// tokens before current_token first. Empties the target's cache, lets the draft restart too
// (its restart hook), and returns how many tokens the pass reruns.
static int restart_cache(GPT *g, Draft *d) {
    g->state.cache_len = 0; // the pass writes the window from position 0
    int rerun = g->config.block_size / 2 - 1;
    if (d && d->kind->restart) // the draft restarts at the same index: its first pass catches up
        d->kind->restart(d, g, 0, rerun);
    return rerun;
}

// One round: the four phases with a tree (a chain is a tree of width 1; plain decoding, a
// tree of no levels, drafts nothing, and its pass is a step). The context rule is folded
// (restart_cache); the tree is cut to the slots left. Returns how many tokens it emits, in
// tb->emitted; or -1, emitting none, at a row that is not finite (o->st says where).
static int tree_round(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *text, const RunOptions *o) {
    // 0. CONTEXT: a full cache restarts, and the pass reruns the window
    tb->restarted = g->state.cache_len == g->config.block_size;
    tb->rerun = tb->restarted ? restart_cache(g, d) : 0;
    tb->cache_len = g->state.cache_len + tb->rerun; // current_token's slot
    int free_slots = g->config.block_size - tb->cache_len; // the root's and its guesses' slots
    tb->room = free_slots < tb->max_rows ? free_slots : tb->max_rows;
    double t0 = now_seconds();
    // the four phases, one line each
    int bad_draft = draft_tree(d, tb, text, &o->sampler, o->rng); // 1. DRAFT, as many rows as fit
    double t1 = now_seconds();
    int bad = verify_tree(g, d, tb, text->tok + text->n - 1, &o->sampler); // 2. VERIFY: one pass
    double t2 = now_seconds();
    // a row not finite stops the run; the target's first, as a draft reading it repeats its NaN
    o->st->nonfinite_file = bad < 0 && d && bad_draft >= 0 ? d->path : NULL; // NULL: target
    bad = bad >= 0 ? bad : bad_draft;
    if (bad >= 0) // tree_generate closes the counters
        return stop_nonfinite(&o->st->core, tb->cache_len + tb->depth[bad],
                              o->max_new_tokens - tb->limit, tb->depth[bad], t0);
    int n = accept_reject_tree(tb, o->rng); // 3. ACCEPT/REJECT down the tree
    compact_kv_cache(g, tb, n - 1); // 4. TRIM: the path's rows into place
    if (d && d->kind->keep) // and the draft keeps what it needs of the path
        d->kind->keep(d, g, tb, n - 1);
    count_tree_round(o->st, d, tb, n, t1 - t0, t2 - t1);
    if (o->trace) trace_tree(o, tb, n);
    return n;
}

// Speculative decoding with trees of tb's shape, any draft d: prefill, then rounds until
// o->max_new_tokens tokens exist. A shape of no levels (d may be NULL) is plain decoding, step by
// step, with the same random stream as specdec.c's generate. seq: room for max(prompt->n, 1) +
// max_new_tokens. Returns -1 if it stopped at a row not finite (o->st->core says where), else 0.
int tree_generate(GPT *g, Draft *d, TreeBuffers *tb, const Tokens *prompt,
                  const RunOptions *o, int *seq) {
    int V = g->config.vocab_size, S = g->config.block_size;
    double t0 = now_seconds();
    int n_seq = start_sequence(seq, prompt), first = n_seq;
    const float *logits = prefill(g, seq, n_seq, S, &o->st->core);
    tally_pass(o->st, PASS_PREFILL, g->state.cache_len, now_seconds() - t0);
    if (d && d->kind->restart) // the draft starts from the prefill's window
        d->kind->restart(d, g, g->state.cache_len, 0);
    if (o->max_new_tokens > 0) {
        float *p = tb->p; // row 0 is free until the first round's pass
        served_probs(p, logits, V, &o->sampler);
        if (first_nonfinite(p, 1, V) >= 0) // the prefill's row: no token comes from it
            return stop_nonfinite(&o->st->core, g->state.cache_len - 1, 0, 0, t0);
        seq[n_seq] = sample_from(p, V, rng_uniform(o->rng));
        if (o->trace) // specdec.c's line, which needs only the vocabulary
            trace_prefill(&(DecodeOptions){.vocab = o->vocab}, g->state.cache_len, seq[n_seq],
                          p[seq[n_seq]]);
        show_colored(o, seq, n_seq, 1, FROM_TARGET);
        n_seq++;
    }
    int failed = 0; // the stream failed (a closed pipe, a full disk): stop there
    while (n_seq - first < o->max_new_tokens && !failed) {
        tb->limit = o->max_new_tokens - (n_seq - first); // the path may give every token wanted
        Tokens text = {seq, n_seq}; // the text so far: current_token last
        int n = tree_round(g, d, tb, &text, o);
        if (n < 0) break; // a row that is not finite: the counters are closed below
        memcpy(seq + n_seq, tb->emitted, (size_t)n * sizeof(int));
        show_colored(o, seq, n_seq, tb->passed, FROM_ACCEPTED); // the path's guesses
        int drew = tb->n_children[tb->path[tb->passed]] > 0; // a leftover draw, else a bonus
        TokenSource src = drew ? FROM_RESAMPLED : tb->rows > 1 ? FROM_BONUS : FROM_TARGET;
        if (n > tb->passed) show_colored(o, seq, n_seq + tb->passed, 1, src); // no guess: a sample
        n_seq += n;
        failed = o->out && o->out->stream && ferror(o->out->stream);
    }
    finish_stats(&o->st->core, n_seq - first, t0);
    // a tree with a level of two children or more: the stats leave out the chain's formulas
    o->st->tree = tb->shape.nodes > tb->shape.depth;
    return o->st->core.nonfinite_token ? -1 : 0;
}

// ----------------------------------------------------------------------------
// Loading: Medusa heads, and a model padded with zeros (--ffn-width)

// Medusa heads, an exit and an EAGLE head are files of floats tied to one target: each reads
// the target's rows, so it fits that model and no other. They share one shape (little-endian,
// as above): a 4-byte magic at offset 0 ("SPDM", "SPDX", "SPDE"), version = 1 at offset 4,
// the sizes from offset 8, the target's fingerprint in the header's last 8 bytes, the floats,
// and a checksum: FNV-1a 64 of every byte before it. read_tied_file checks what they share;
// each format's sizes function checks its own fields and gives the number of floats.
//
// tinyshakespeare/medusa.bin (tinyshakespeare/train medusa): 36 + 4N(C+1)C bytes, 66,596
// for 4 heads on the shipped target
//   offset  size          field
//   8       12            n_heads N, n_embd C, vocab_size V (C and V: the target's)
//   20      8             the target's fingerprint (target_fingerprint)
//   28      4N(C+1)C      every head's W (N, C, C), then every head's b (N, C)
// tinyshakespeare/exit.bin (tinyshakespeare/train exit):
//   8       4             layer L: the exit reads the residual after blocks 0 .. L-1
//   12      8             n_embd C, vocab_size V (the target's)
//   20      8             the target's fingerprint
//   28      4(2C+CV+V)    ln_weight (C), ln_bias (C), head_weight (C, V), head_bias (V)
// tinyshakespeare/eagle.bin (tinyshakespeare/train eagle):
//   8       4             n_feat: 1 (EAGLE reads the top feature) or 3 (EAGLE-3 fuses three)
//   12      12            feat_layer[3]: n_layer, 0, 0 (EAGLE), or low, middle, n_layer
//   24      16            n_embd C, vocab_size V, ffn_width H and n_head of its block
//   40      8             the target's fingerprint
//   48      ...           EAGLE-3 only: fuse_weight (3C, C), fuse_bias (C); then fc_weight
//                         (2C, C), fc_bias (C), then its block's 13 tensors in the checkpoint's
//                         order (ln1_weight .. ffwd_down_bias, TENSOR_NAMES[2..14])
#define MEDUSA_MAGIC "SPDM"
#define MEDUSA_VERSION 1
#define MEDUSA_HEADER 28 // bytes before the floats: magic, version, 3 sizes, fingerprint
#define MEDUSA_MAX_HEADS TREE_MAX_DEPTH // a head per tree level, and a tree has at most 16
#define EXIT_MAGIC "SPDX"
#define EXIT_VERSION 1
#define EXIT_HEADER 28 // bytes before the floats: magic, version, 3 sizes, fingerprint
#define EAGLE_MAGIC "SPDE"
#define EAGLE_VERSION 1
#define EAGLE_HEADER 48 // magic, version, n_feat, 3 feature layers, 4 sizes, fingerprint

// A target's fingerprint: fnv1a64 of its parameters as its checkpoint stores them, no copy.
uint64_t target_fingerprint(const GPT *g) {
    uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a 64's offset basis, as in fnv1a64
    for (size_t i = 0; i < g->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &g->params[i], 4);
        for (int k = 0; k < 4; k++) // low byte first, as put_u32 writes it
            h = (h ^ ((bits >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
    }
    return h;
}

// What a file tied to one target is, for read_tied_file and its messages.
typedef struct {
    const char *magic; // its first 4 bytes
    size_t header;     // bytes before the floats; the fingerprint is its last 8
    const char *what;  // e.g. "medusa heads", in the messages
    const char *fix;   // how to make one that fits
    // the floats the header's sizes call for, or 0 with why set; `needs` names them, e.g.
    // "4 heads 64 wide": the format's own checks
    size_t (*sizes)(const unsigned char *buf, const GPT *target, char *why, char *needs);
} TiedFile;

// Checks a tied file's bytes, in order: its header's length, magic, version, the format's
// sizes, its length, checksum and fingerprint. The floats' count, or 0 with why set.
static size_t check_tied_file(const unsigned char *buf, size_t n, const GPT *target,
                              const TiedFile *f, char *why) {
    char needs[64] = "";
    size_t N = 0, want = 0;
    if (n < f->header)
        snprintf(why, 256, "file is %zu bytes, shorter than the %zu-byte header", n, f->header);
    else if (memcmp(buf, f->magic, 4) != 0)
        snprintf(why, 256, "wrong magic (not a specdec %s file)", f->what);
    else if (get_u32(buf + 4) != 1)
        snprintf(why, 256, "version %u, this program reads version 1", get_u32(buf + 4));
    else if ((N = f->sizes(buf, target, why, needs)) == 0)
        return 0; // the sizes function said why
    else if (n != (want = f->header + 4 * N + 8)) // N < 2^40: no overflow on a 64-bit size_t
        snprintf(why, 256, "file is %zu bytes, but %s need %zu: %s", n, needs, want,
                 n < want ? "truncated" : "too long: bytes were appended");
    // the file's integrity before the pairing: a damaged file must not be blamed on the target
    else if (fnv1a64(buf, n - 8) != get_u64(buf + n - 8))
        snprintf(why, 256, "checksum mismatch: the file is corrupted");
    else if (get_u64(buf + f->header - 8) != target_fingerprint(target))
        snprintf(why, 256, "trained on another target model (its fingerprint does not match "
                 "this one's)");
    return why[0] ? 0 : N;
}

// Reads a file of floats tied to target: its bytes checked (check_tied_file), then every
// float's finiteness (a NaN would spread through every row it touches). Returns its floats
// (malloc'd; as many as its sizes function counts) and a copy of its header; NULL with err set.
static float *read_tied_file(const char *path, const GPT *target, const TiedFile *f,
                             unsigned char *header, char *err, size_t errlen) {
    size_t n = 0;
    unsigned char *buf = read_file(path, &n, f->what, f->fix, err, errlen);
    if (!buf) return NULL;
    char why[256] = ""; // the reason alone; empty while every check passes
    size_t N = check_tied_file(buf, n, target, f, why);
    float *x = N ? malloc(N * sizeof(float)) : NULL;
    if (N && !x) snprintf(why, sizeof(why), "out of memory for %zu floats", N);
    for (size_t i = 0; !why[0] && i < N; i++) {
        uint32_t bits = get_u32(buf + f->header + 4 * i);
        memcpy(&x[i], &bits, 4);
        if (!isfinite(x[i])) snprintf(why, sizeof(why), "float %zu is not a finite number", i);
    }
    if (!why[0]) memcpy(header, buf, f->header); // the caller reads its sizes there
    free(buf);
    if (why[0]) free(x); // on failure nothing is held, and err says why
    if (why[0]) fail_with(err, errlen, "%s '%s': %s (%s)", f->what, path, why, f->fix);
    return why[0] ? NULL : x;
}

// Medusa's sizes: 1 to 16 heads, each C wide with the target's C and V.
static size_t medusa_sizes(const unsigned char *buf, const GPT *g, char *why, char *needs) {
    uint32_t N = get_u32(buf + 8), C = get_u32(buf + 12), V = get_u32(buf + 16);
    if (N < 1 || N > MEDUSA_MAX_HEADS)
        snprintf(why, 256, "n_heads %u out of range (1 to %d)", N, MEDUSA_MAX_HEADS);
    // the sizes next: a mismatched pair gets its own words, before the file's size is compared
    else if (C != (uint32_t)g->config.n_embd || V != (uint32_t)g->config.vocab_size)
        snprintf(why, 256, "heads for a model %u wide with %u tokens, but the target is %d wide "
                 "with %d", C, V, g->config.n_embd, g->config.vocab_size);
    snprintf(needs, 64, "%u heads %u wide", N, C);
    return why[0] ? 0 : (size_t)N * (C + 1) * C;
}

// Reads Medusa heads for `target` from path into m; on failure err and -1, nothing allocated.
int load_medusa(const char *path, const GPT *target, MedusaHeads *m, char *err, size_t errlen) {
    static const TiedFile f = {MEDUSA_MAGIC, MEDUSA_HEADER, "medusa heads", "train heads for "
                               "this model: 'make train-medusa', or 'tinyshakespeare/train "
                               "medusa -m MODEL -o " DEFAULT_MEDUSA "'", medusa_sizes};
    unsigned char header[MEDUSA_HEADER] = {0};
    memset(m, 0, sizeof(*m)); // free_medusa is safe on it whatever fails
    float *w = read_tied_file(path, target, &f, header, err, errlen);
    if (!w) return -1;
    int N = (int)get_u32(header + 8), C = target->config.n_embd;
    *m = (MedusaHeads){N, C, target->config.vocab_size, w, w + (size_t)N * C * C};
    return 0;
}

// The exit's sizes: its layer must leave blocks to verify with; C and V the target's.
static size_t exit_sizes(const unsigned char *buf, const GPT *g, char *why, char *needs) {
    uint32_t L = get_u32(buf + 8), C = get_u32(buf + 12), V = get_u32(buf + 16);
    if (C != (uint32_t)g->config.n_embd || V != (uint32_t)g->config.vocab_size)
        snprintf(why, 256, "an exit for a model %u wide with %u tokens, but the target is %d "
                 "wide with %d", C, V, g->config.n_embd, g->config.vocab_size);
    else if (L < 1 || L >= (uint32_t)g->config.n_layer)
        snprintf(why, 256, "an exit after block %u, and the target's %d blocks allow 1 to %d",
                 L, g->config.n_layer, g->config.n_layer - 1);
    snprintf(needs, 64, "an exit head %u wide", C);
    return why[0] ? 0 : 2 * (size_t)C + (size_t)C * V + V;
}

// Reads a trained exit for `target` from path into e; on failure err and -1, nothing held.
int load_exit(const char *path, const GPT *target, ExitHead *e, char *err, size_t errlen) {
    static const TiedFile f = {EXIT_MAGIC, EXIT_HEADER, "exit head", "train one for this "
                               "model: 'make train-exit', or 'tinyshakespeare/train exit -m "
                               "MODEL -o " DEFAULT_EXIT "'", exit_sizes};
    unsigned char header[EXIT_HEADER] = {0};
    float *x = read_tied_file(path, target, &f, header, err, errlen);
    if (!x) return -1;
    size_t C = get_u32(header + 12), V = get_u32(header + 16);
    *e = (ExitHead){(int)get_u32(header + 8), (int)C, (int)V, x, x + C, x + 2 * C,
                    x + 2 * C + C * V};
    return 0;
}

// EAGLE's sizes: the top feature (EAGLE), or three rows fused (EAGLE-3: after blocks low <
// middle < top = n_layer); a block of the target's width.
static size_t eagle_sizes(const unsigned char *buf, const GPT *g, char *why, char *needs) {
    uint32_t n_feat = get_u32(buf + 8), C = get_u32(buf + 24), V = get_u32(buf + 28);
    uint32_t H = get_u32(buf + 32), NH = get_u32(buf + 36), L = (uint32_t)g->config.n_layer;
    uint32_t low = get_u32(buf + 12), mid = get_u32(buf + 16), top = get_u32(buf + 20);
    int rows_ok = n_feat == 1 ? low == L : n_feat == 3 && 1 <= low && low < mid && mid < top &&
                                           top == L;
    if (C != (uint32_t)g->config.n_embd || V != (uint32_t)g->config.vocab_size)
        snprintf(why, 256, "a head for a model %u wide with %u tokens, but the target is %d "
                 "wide with %d", C, V, g->config.n_embd, g->config.vocab_size);
    else if (!rows_ok)
        snprintf(why, 256, "n_feat %u reading after blocks %u, %u, %u, but this target has %u "
                 "blocks: EAGLE reads the top one alone, EAGLE-3 three, rising, the top last",
                 n_feat, low, mid, top, L);
    else if (H < 1 || H > 65536 || NH < 1 || C % NH != 0)
        snprintf(why, 256, "its block's ffn_width %u or n_head %u does not fit a width of %u",
                 H, NH, C);
    snprintf(needs, 64, "an eagle head %u wide", C);
    if (why[0]) return 0;
    Config one = {1, (int)NH, (int)C, g->config.block_size, (int)V, (int)H};
    size_t sizes[N_TENSORS], block = 0;
    weight_sizes(&one, sizes);
    for (int i = 2; i <= 14; i++) block += sizes[i]; // ln1_weight .. ffwd_down_bias
    size_t fuse = n_feat == 3 ? (3 * (size_t)C + 1) * C : 0; // EAGLE-3's fuse Linear first
    return fuse + (2 * (size_t)C + 1) * C + block;
}

// Reads an EAGLE head for `target` from path into e; on failure err and -1, nothing held.
int load_eagle(const char *path, const GPT *target, EagleHead *e, char *err, size_t errlen) {
    static const TiedFile f = {EAGLE_MAGIC, EAGLE_HEADER, "eagle head", "train one for this "
                               "model: 'make train-eagle', or 'tinyshakespeare/train eagle -m "
                               "MODEL -o " DEFAULT_EAGLE "'", eagle_sizes};
    unsigned char header[EAGLE_HEADER] = {0};
    float *x = read_tied_file(path, target, &f, header, err, errlen);
    if (!x) return -1;
    int C = (int)get_u32(header + 24), n_feat = (int)get_u32(header + 8);
    Config one = {1, (int)get_u32(header + 36), C, target->config.block_size,
                  (int)get_u32(header + 28), (int)get_u32(header + 32)};
    size_t fuse = n_feat == 3 ? (3 * (size_t)C + 1) * C : 0; // EAGLE-3's fuse Linear first
    *e = (EagleHead){.C = C, .n_feat = n_feat, .feat_layer = {(int)get_u32(header + 12),
                     (int)get_u32(header + 16), (int)get_u32(header + 20)},
                     .fuse_weight = fuse ? x : NULL,
                     .fuse_bias = fuse ? x + 3 * (size_t)C * C : NULL,
                     .fc_weight = x + fuse, .fc_bias = x + fuse + 2 * (size_t)C * C};
    if (build_gpt(&e->block, &one) != 0)
        return fail_with(err, errlen, "out of memory for the eagle head's block");
    // the block's tensors, ln1_weight .. ffwd_down_bias, follow fc's: in its parameters too
    const Weights *w = &e->block.w;
    memcpy(w->ln1_weight, e->fc_bias + C, (size_t)(w->ln_f_weight - w->ln1_weight) * sizeof(float));
    return 0;
}

// Widens the MLP to H2 >= H hidden units with zeros (--ffn-width): each new unit adds exact
// zeros, so the logits stay the same, bit for bit, but there is more to stream (notes/speed.md).
// Medusa heads are loaded before the widening: they fit the model's own fingerprint.
int widen_ffn(GPT *g, int H2) {
    if (H2 < g->config.ffn_width) return -1; // narrower would cut real units: another model
    Config c = g->config;
    c.ffn_width = H2;
    GPT wide;
    if (build_gpt(&wide, &c) != 0) {
        free_gpt(&wide); // whatever was built
        return -1;
    }
    // write the zeros: calloc's untouched pages all map the kernel's one zero page, which
    // sits in the cache, and the padded model would only pretend to stream its weights
    memset(wide.params, 0, wide.n_params * sizeof(float));
    size_t from[N_TENSORS], to[N_TENSORS], L = c.n_layer, C = c.n_embd;
    weight_sizes(&g->config, from);
    weight_sizes(&c, to);
    const float *src = g->params;
    float *dst = wide.params;
    for (int i = 0; i < N_TENSORS; i++) {
        // three tensors are made of rows that widen: up weight (L, C, H), L*C rows of H;
        // up bias (L, H), L rows of H; down weight (L, H, C), L layers of H*C, each unit's
        // row of C, the new units' rows after the old. The rest are copied whole, as one row.
        size_t rows = i == 11 ? L * C : i == 12 || i == 13 ? L : 1;
        for (size_t r = 0; r < rows; r++) // a row's real values first, then zeros to its new end
            memcpy(dst + r * (to[i] / rows), src + r * (from[i] / rows),
                   from[i] / rows * sizeof(float));
        src += from[i]; // the next tensor, in both blocks
        dst += to[i];
    }
    free_gpt(g);
    *g = wide; // the Weights and RunState pointers point into wide's own allocations
    return 0;
}

// ----------------------------------------------------------------------------
// Self-test: every draft and shape of the one loop gives plain greedy decoding's text

// Decodes prompt with the one loop, tree shape `shape` and draft d (NULL with a shape of no
// levels: plain decoding), into seq; st receives the counters. 0, or -1 out of memory.
int run_tree(GPT *g, Draft *d, const TreeShape *shape, const Tokens *prompt, Sampler s,
             uint64_t seed, int max_new_tokens, int *seq, RunStats *st) {
    TreeBuffers tb;
    Rng rng;
    rng_seed(&rng, seed);
    int rc = build_tree_buffers(&tb, shape, g->config.vocab_size, g->config.block_size);
    tb.top = s.temperature == 0.0f || (d && d->kind->sure); // sure guesses
    RunOptions o = {.max_new_tokens = max_new_tokens, .sampler = s, .rng = &rng, .st = st};
    if (rc == 0) tree_generate(g, d, &tb, prompt, &o, seq);
    free_tree_buffers(&tb);
    return rc;
}

// A chain of K levels: the tree 1,1,..,1, specdec.c's chain of K guesses.
TreeShape chain_shape(int K) {
    TreeShape shape = {.depth = K, .nodes = K};
    for (int i = 0; i < K; i++) shape.width[i] = 1;
    return shape;
}

// One loop against specdec.c on one prompt, seed 7: a draft sampled (t > 0: the bigram's
// chain) against speculative_generate, the same draws in the same order; else against
// generate, greedy (or at any t for the shape of no levels, which draws as generate does).
// Prints the case's line; 1 when the texts are equal.
static int beyond_case(GPT *g, Draft *d, const char *label, const TreeShape *shape,
                       const Tokens *prompt, float t) {
    int n = 300, start = prompt->n > 0 ? prompt->n : 1, K = shape->depth, spec = d && t > 0;
    int *a = malloc(2 * (size_t)(start + n) * sizeof(int)); // the loop's text, then specdec's
    int *b = a ? a + start + n : NULL;
    float p[256];
    RunStats st = {0};
    Stats sp = {0};
    SpecBuffers sb = {0};
    Rng rng;
    rng_seed(&rng, 7);
    DecodeOptions o = {.max_new_tokens = n, .K = K, .temperature = t, .rng = &rng, .st = &sp};
    int same = a && b && (!spec || build_spec_buffers(&sb, K, g->config.vocab_size) == 0) &&
               run_tree(g, d, shape, prompt, (Sampler){t, 0, 0.0f}, 7, n, a, &st) == 0;
    if (same && spec) speculative_generate(g, &d->bigram, &sb, prompt, &o, b);
    else if (same) generate(g, prompt, &o, b, p);
    same = same && (spec || st.core.emitted == n) &&
           memcmp(a + start, b + start, (size_t)n * sizeof(int)) == 0;
    if (spec)
        printf("%s bigram chain K=%d at t=1 through the one loop == speculative_generate's text, "
               "%d tokens, seed 7\n", same ? "PASS" : "FAIL", K, n);
    else
        printf("%s %-7s %-26s t=%g: %d tokens %s (%ld target passes against %ld; %.3f tokens "
               "a verify pass)\n", same ? "PASS" : "FAIL", d ? d->name : "plain", label, t, n,
               same ? "as generate's" : "DIFFER", st.core.target_passes, sp.target_passes,
               ratio(st.core.round_tokens, st.core.rounds));
    free_spec_buffers(&sb);
    free(a);
    return same;
}

// Runs every case: each draft's chains and trees, greedy, against generate; plain decoding
// through the loop at t = 1 (test/test_tree.c checks the masked pass itself, bit for bit).
// Returns the number of failures.
int beyond_selftest(GPT *g, Draft *drafts, int n_drafts, const Corpus *corpus) {
    int S = g->config.block_size, failures = 0, cases = 0;
    const Tokens prompts[] = {{corpus->tokens, 0}, {corpus->tokens, S / 2},
                              {corpus->tokens, (int)selftest_min_corpus(S)}};
    static const char *const tree_labels[] = {"3,2,1,1", "2,2,2", "4,1"};
    static const char *const prompt_labels[] = {"empty", "half window", "two windows"};
    TreeShape trees[3] = {{4, {3, 2, 1, 1}, 21}, {3, {2, 2, 2}, 14}, {2, {4, 1}, 8}};
    const int Ks[5] = {1, 2, 3, 5, 8}; // chains; specdec.c's self-test runs the bigram's 1..8
    TreeShape none = {0}, chain4 = chain_shape(4); // plain decoding; the bigram's chain, sampled
    char label[32]; // a case's shape and prompt
    for (int i = 0; i < 3; i++) { // shapes of more nodes than the window has slots are cut
        for (int d = 0; d < n_drafts; d++)
            for (int j = 0; j < 5 && Ks[j] < S && drafts[d].kind; j++, cases++) { // lookup too
                if (drafts[d].medusa.n_heads && Ks[j] > drafts[d].medusa.n_heads) break;
                TreeShape chain = chain_shape(Ks[j]); // (Medusa: a head per level, no deeper)
                snprintf(label, sizeof(label), "chain %d, %s", Ks[j], prompt_labels[i]);
                failures += !beyond_case(g, &drafts[d], label, &chain, &prompts[i], 0.0f);
            }
        for (int d = 0; d < n_drafts; d++)
            for (int s = 0; s < 3 && drafts[d].kind && !drafts[d].kind->no_tree; s++, cases++) {
                snprintf(label, sizeof(label), "tree %s, %s", tree_labels[s], prompt_labels[i]);
                failures += !beyond_case(g, &drafts[d], label, &trees[s], &prompts[i], 0.0f);
            }
        failures += !beyond_case(g, NULL, prompt_labels[i], &none, &prompts[i], 1.0f);
        failures += !beyond_case(g, &drafts[0], prompt_labels[i], &chain4, &prompts[i], 1.0f);
        cases += 2;
    }
    printf("selftest: %d of %d cases passed\n", cases - failures, cases);
    return failures;
}

// ----------------------------------------------------------------------------
// Command line: ./beyond [options], specdec's options and the ones above

// What the command line asked for: specdec's options, and the ones beyond.c adds.
typedef struct {
    Options core;             // -m -i -p -n -k -t -s --trace --compare --plain --selftest ...
    const char *draft;        // --draft: bigram, gpt, lookup, medusa, or a checkpoint's path
    const char *tree;         // --tree, e.g. "3,2,1,1", or NULL: a chain of K
    int top_k, ffn_width;     // --top-k (0: off), --ffn-width (0: the model's own)
    float top_p, draft_p_min; // --top-p (0: off), --draft-p-min (0: off)
    int color;                // 1 --color, 0 --no-color, -1 on a terminal if NO_COLOR unset/empty
} BeyondOptions;

#define MAX_FFN_WIDTH 16777216 // 2^24 hidden units: 32 GiB of weights for the lecture's model

// The help text of -h: specdec's, then what beyond adds.
void beyond_usage(FILE *f) {
    usage(f); // its own options follow
    fprintf(f, "./beyond takes every option above, and:\n"
        "  --draft D   which draft guesses: one of the names below, or the path of a\n"
        "              checkpoint with the target's vocabulary (a gpt draft)\n");
    for (int i = 0; i < N_DRAFTS; i++) // the table's own words, and each draft's file
        fprintf(f, "      %-20s %s%s%s%s\n", DRAFTS[i].name, DRAFTS[i].about,
                DRAFTS[i].file ? " (" : "", DRAFTS[i].file ? DRAFTS[i].file : "",
                DRAFTS[i].file ? ")" : "");
    fprintf(f, "  --top-k N   keep the N most likely tokens, 1..V, in the target and the draft\n"
        "  --top-p P   keep the fewest most likely tokens whose mass reaches P, 0 < P <= 1;\n"
        "              both filter after the temperature; at -t 0 they change nothing\n"
        "  --tree W1,W2,..  draft a tree: W1 guesses after current_token, W2 after each of\n"
        "              those, ...; one masked pass verifies it (e.g. 3,2,1,1; 1,1,1,1 = -k 4)\n"
        "  --draft-p-min P  a guess the draft gives less than P (at t = 1, unfiltered) is its\n"
        "              chain's last: fewer wasted guesses; the same text at -t 0, the same\n"
        "              distribution at t > 0 (0 = off)\n"
        "  --ffn-width H  widen the MLP to H hidden units with zeros: the same text, but\n"
        "              2 KB of weights per unit to stream (65536: 136 MB; notes/speed.md)\n"
        "  --color     colour each character by its source (accepted draft, resampled, bonus,\n"
        "              target sample); the default on a terminal if NO_COLOR is unset or empty\n"
        "  --no-color  plain text even on a terminal\n"
        "--selftest here checks every draft and tree shape against plain greedy decoding.\n");
}

// Parses a --tree shape, "3,2,1,1", whose nodes fit a window of S. 0, or -1 with err set.
int parse_tree_shape(const char *text, int V, int S, TreeShape *shape, char *err, size_t errlen) {
    memset(shape, 0, sizeof(*shape));
    long level_nodes = 1; // nodes at the level above: the root alone
    char *end; // where strtol stopped: the comma before the next width, or the text's end
    for (const char *s = text;; s = end + 1) {
        errno = 0;
        long w = strtol(s, &end, 10);
        if (!isdigit((unsigned char)*s) || errno || w < 1 || w > V || (*end != ',' && *end != '\0'))
            return fail_with(err, errlen, "--tree '%s': each width must be a whole number 1..%d, "
                             "comma-separated, e.g. --tree 3,2,1,1", text, V);
        if (shape->depth == TREE_MAX_DEPTH)
            return fail_with(err, errlen, "--tree '%s' has more than %d levels: give fewer",
                             text, TREE_MAX_DEPTH);
        shape->width[shape->depth++] = (int)w;
        level_nodes *= w;
        shape->nodes += (int)(level_nodes < S ? level_nodes : S); // no overflow past S
        if (shape->nodes > S - 1)
            return fail_with(err, errlen, "--tree '%s' has over %d guesses, more than the %d "
                             "slots after current_token in a window of %d: give fewer or "
                             "narrower levels", text, S - 1, S - 1, S);
        if (*end == '\0') return 0;
    }
}

// Fills o from argv, specdec's options and its own; on a bad argument writes one line to err
// and returns -1.
int parse_beyond_args(int argc, char **argv, BeyondOptions *o, char *err, size_t errlen) {
    *o = (BeyondOptions){.draft = "bigram", .color = -1};
    const OptionSpec more[] = { // after specdec's rows, checked as they are
        {"--color", OPT_FLAG, &o->color, 1, 0, NULL, IN_SELFTEST},
        {"--no-color", OPT_FLAG, &o->color, 0, 0, NULL, IN_SELFTEST},
        {"--draft", OPT_TEXT, &o->draft, 0, 0, NULL, IN_PLAIN}, // --selftest: a path, below
        {"--tree", OPT_TEXT, &o->tree, 0, 0, NULL, IN_SELFTEST | IN_PLAIN},
        {"--top-k", OPT_WHOLE, &o->top_k, 1, 256, "a whole number from 1 to the vocabulary's "
         "size", IN_SELFTEST},
        {"--ffn-width", OPT_WHOLE, &o->ffn_width, 1, MAX_FFN_WIDTH, "a whole number of hidden "
         "units up to 16777216, at least the model's own", 0},
        {"--top-p", OPT_REAL, &o->top_p, FLT_MIN, 1.0, "a probability mass above 0 (at "
         "least FLT_MIN, 1.18e-38) and at most 1", IN_SELFTEST},
        {"--draft-p-min", OPT_REAL, &o->draft_p_min, 0.0, 1.0, "0 (off) or a probability "
         "from 1.18e-38 (FLT_MIN) to 1", IN_SELFTEST | IN_PLAIN},
        {0}}; // the end: a row without a flag
    if (parse_args(argc, argv, &o->core, more, err, errlen) != 0) return -1;
    if (o->core.run_selftest && find_draft(o->draft) && strcmp(o->draft, "bigram") != 0)
        return fail_with(err, errlen, "--selftest runs every draft; with it --draft takes a "
                         "checkpoint's path, for gpt and cascade; drop --draft %s", o->draft);
    if (o->tree && !o->core.K_default) // the tree's levels are its K, for the chain beside it too
        return fail_with(err, errlen, "-k %d sets a chain's length, and --tree %s a tree's "
                         "levels (--compare's chain beside it takes that depth); drop -k",
                         o->core.K, o->tree);
    if (o->tree) // a tree's depth is its K: no chain of -k's default
        o->core.K = o->core.K_default = 0;
    return 0;
}

// What main loads: specdec's Loaded, the tree's shape, and the model's description.
typedef struct {
    Loaded core;      // the target, its vocabulary, the corpus, the prompt
    TreeShape shape;  // --tree, or the chain of -k
    char source[256]; // the "model:" line: the path, and the widening if any
} BeyondLoaded;

// Checks the options that need the model and the prompt: -k, --top-k, --tree, the drafts'
// combinations. 0, or -1 with err set.
int check_beyond_inputs(const BeyondOptions *o, BeyondLoaded *ld, char *err, size_t errlen) {
    int S = ld->core.g.config.block_size, V = ld->core.v.size, n = ld->core.prompt.n;
    const DraftKind *kind = find_draft(o->draft) ? find_draft(o->draft) : find_draft("gpt");
    if (o->top_k > V)
        return fail_with(err, errlen, "--top-k %d is more than the vocabulary's %d tokens; use "
                         "--top-k 1..%d", o->top_k, V, V);
    if (o->core.K > MAX_LEVELS) // a chain is a tree of K levels, and a shape holds MAX_LEVELS
        return fail_with(err, errlen, "-k %d: ./beyond drafts chains of at most %d guesses; "
                         "give -k 1..%d", o->core.K, MAX_LEVELS, MAX_LEVELS);
    ld->shape = chain_shape(o->core.K); // no --tree: a chain of K levels
    if (o->tree && parse_tree_shape(o->tree, V, S, &ld->shape, err, errlen) != 0) return -1;
    int chain = ld->shape.nodes == ld->shape.depth; // every level one child wide
    if (o->tree && kind->no_tree) // the table says which drafts draft no tree, and why
        return fail_with(err, errlen, "--tree needs several guesses per position, and %s; drop "
                         "--tree, or use --draft bigram or gpt", kind->no_tree);
    if (kind->no_p_min && o->draft_p_min > 0.0f)
        return fail_with(err, errlen, "--draft-p-min stops a draft that is unsure of its guess, "
                         "and %s; drop --draft-p-min, or use --draft bigram or gpt",
                         kind->no_p_min);
    if (!chain && o->draft_p_min > 0.0f)
        return fail_with(err, errlen, "--draft-p-min ends a chain at its last sure guess, and a "
                         "tree has no single last guess; drop one of --tree and --draft-p-min");
    if (!strcmp(o->draft, "lookup") && n <= LOOKUP_MIN_N) // a prompt too short to copy from
        return fail_with(err, errlen, "--draft lookup copies from the prompt, and a prompt of %d "
                         "character%s holds no %d-gram to find again; give -p at least %d "
                         "characters, or another draft", n, n == 1 ? "" : "s", LOOKUP_MIN_N,
                         LOOKUP_MIN_N + 1);
    return 0;
}

// Widens the loaded model's MLP for --ffn-width H if H fits the model and memory, and writes
// ld->source, the model's description. 0, or -1 with err set.
int setup_width(const BeyondOptions *o, BeyondLoaded *ld, char *err, size_t errlen) {
    GPT *g = &ld->core.g;
    int H = o->ffn_width, H_model = g->config.ffn_width;
    double mb = 8.0 * g->config.n_layer * g->config.n_embd * H / 1e6; // the MLP's (C, H) pair
    double ram_mb = (double)sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGESIZE) / 1e6;
    if (H > 0 && H < H_model) // padding only adds units: a narrower MLP is another model
        return fail_with(err, errlen, "--ffn-width %d is narrower than the model's MLP of %d "
                         "units; use %d or more", H, H_model, H_model);
    if (H > 0 && ram_mb > 0 && mb > ram_mb / 2) // leave room: the pages are written, not reserved
        return fail_with(err, errlen, "--ffn-width %d needs %.0f MB of MLP weights, more than half "
                         "of this machine's %.0f MB of memory; use a smaller width", H, mb, ram_mb);
    if (H > 0 && widen_ffn(g, H) != 0)
        return fail_with(err, errlen, "out of memory widening the MLP to %d units (%.0f MB); "
                         "use a smaller --ffn-width", H, mb);
    // the path, and what the weights became if widened (unwidened, "%s" ignores the rest)
    const char *fmt = H > 0 ? "%s, MLP padded with zeros to %d units (%.1f MB of weights)" : "%s";
    snprintf(ld->source, sizeof(ld->source), fmt, o->core.model_path, H, g->n_params * 4.0 / 1e6);
    return 0;
}

// The decoders a generation run may take, in the order it runs them: the tree (--tree), the
// chain of K, plain decoding; and the title of each one's stats.
enum { RUN_TREE, RUN_CHAIN, RUN_PLAIN, N_RUNS };
static const char *const RUN_TITLE[N_RUNS] = {"tree decoding", "speculative decoding",
                                              "plain decoding"};

// Prints what a generation run will do (stderr): sampling, tree, filter, draft, colours.
void print_run_header(const BeyondOptions *o, const Draft *d, const TreeShape *shape, int color) {
    const Options *c = &o->core;
    fprintf(stderr, "sampling: seed %llu, temperature %g%s, K=%d, %d new tokens\n",
            (unsigned long long)c->seed, c->temperature, c->temperature == 0 ? " (greedy)" : "",
            shape->depth, c->max_new_tokens);
    if (o->tree && !c->plain) // the tree's shape, and what a whole one holds
        fprintf(stderr, "tree: %s, %d guesses in %d levels, cut to the window's free slots\n",
                o->tree, shape->nodes, shape->depth);
    if (o->draft_p_min > 0.0f && !c->plain) // the draft's stopping rule
        fprintf(stderr, "draft-p-min: %g (a guess the draft gives less is its round's last)\n",
                o->draft_p_min);
    if (o->top_k || o->top_p) // the served distribution, on both sides
        fprintf(stderr, "filter: top-k %d, top-p %g (0: off), applied to the target and the "
                "draft\n", o->top_k, o->top_p);
    if (!c->plain && d->model.params) // which draft guesses, and a model's size: its cost
        fprintf(stderr, "draft: %s, %s, n_layer=%d n_embd=%d -> %zu parameters\n", d->name,
                d->path, d->model.config.n_layer, d->model.config.n_embd, d->model.n_params);
    else if (!c->plain) // and a file of heads on the target, if any
        fprintf(stderr, "draft: %s%s%s\n", d->name, d->path ? ", " : "", d->path ? d->path : "");
    if (!color) return;
    fputs("colours:", stderr); // the legend, one line, each name in its own colour
    for (int i = 0; i < N_SOURCES; i++)
        fprintf(stderr, " %s%s\033[0m", SOURCE_COLOR[i], SOURCE_NAME[i]);
    fputc('\n', stderr);
}

// Runs the chosen decoders through the one loop, text to stdout, stats to stderr. Returns 0;
// 1 out of memory, or with err set at a row that is not finite; 2 when stdout failed.
int run_beyond(const BeyondOptions *o, BeyondLoaded *ld, Draft *d, char *err, size_t errlen) {
    const Options *c = &o->core;
    GPT *g = &ld->core.g;
    int V = g->config.vocab_size, S = g->config.block_size;
    int K = ld->shape.depth; // --tree: the chain beside it is as deep
    int start = ld->core.prompt.n > 0 ? ld->core.prompt.n : 1, cap = start + c->max_new_tokens;
    TreeShape shapes[N_RUNS] = {[RUN_TREE] = ld->shape, [RUN_CHAIN] = chain_shape(K)};
    // (N_RUNS, cap) each run's text, prompt + output (refills read it), to compare
    int *text[N_RUNS] = {malloc((size_t)N_RUNS * cap * sizeof(int))};
    unsigned char *source = calloc((size_t)cap, 1); // each token's TokenSource, per run
    TreeBuffers tb[N_RUNS] = {0};
    int rc = !text[0] || !source; // 1: out of memory
    for (int r = 0; r < N_RUNS; r++) rc |= build_tree_buffers(&tb[r], &shapes[r], V, S) != 0;
    if (rc) goto out;
    // colour: as asked, or by default when stdout is a terminal and NO_COLOR says nothing
    const char *no_color = getenv("NO_COLOR");
    int color = o->color >= 0 ? o->color : isatty(fileno(stdout)) && !(no_color && *no_color);
    // streamed as made, except under --trace (the trace has the stage) or --compare (timing)
    Output out = {c->trace || c->compare ? NULL : stdout, source, color}; // stream, source, color
    RunStats st[N_RUNS] = {0};
    Rng rng; // seeded afresh before each decoder
    RunOptions opt = {.max_new_tokens = c->max_new_tokens,
                      .sampler = {c->temperature, o->top_k, o->top_p},
                      .trace = c->trace, .vocab = &ld->core.v, .out = &out, .rng = &rng};
    print_run_header(o, d, &ld->shape, color);
    // the runs: the tree (--tree), the chain (without --tree, or beside it with --compare),
    // plain decoding (--plain, or beside the others with --compare)
    int wanted[N_RUNS] = {[RUN_TREE] = !c->plain && o->tree != NULL,
                          [RUN_CHAIN] = !c->plain && (!o->tree || c->compare),
                          [RUN_PLAIN] = c->plain || c->compare};
    int ran = 0; // the runs so far: each after the first gets a heading
    for (int run = 0; run < N_RUNS && rc == 0; run++) {
        if (!wanted[run]) continue;
        if (ran++ > 0) fprintf(stderr, run == RUN_PLAIN ? "\nplain decoding, same seed:\n"
                                                         : "\na chain of K=%d, same seed:\n", K);
        if (!c->no_prompt) fputs(c->prompt, stdout); // stdout: the prompt, then the text
        rng_seed(&rng, c->seed); // the same seed for each, so greedy texts compare byte for byte
        opt.st = &st[run];
        text[run] = text[0] + (size_t)run * cap; // its row of the one block
        tb[run].top = c->temperature == 0.0f || d->kind->sure; // sure guesses
        int stopped = tree_generate(g, run == RUN_PLAIN ? NULL : d, &tb[run],
                                    &ld->core.prompt, &opt, text[run]);
        if (!out.stream) write_text(stdout, &ld->core.v, text[run] + start, source + start,
                                    (int)st[run].core.emitted, color);
        if (!stopped) fputc('\n', stdout); // a stopped text ends at its last whole token
        rc = fflush(stdout) != 0 || ferror(stdout) ? 2 : 0; // main says why
        const char *bad_file = st[run].nonfinite_file ? st[run].nonfinite_file : c->model_path;
        if (rc == 0 && stopped) rc = refuse_nonfinite(bad_file, &st[run].core, err, errlen);
        if (rc == 0) print_run_stats(RUN_TITLE[run], &st[run], run != RUN_PLAIN, K);
    }
    int spec = o->tree ? RUN_TREE : RUN_CHAIN; // the speculative run --compare weighs
    if (rc == 0 && c->compare) { // equal texts are required at t = 0, merely possible at t > 0
        int same = memcmp(text[spec] + start, text[RUN_PLAIN] + start,
                          (size_t)c->max_new_tokens * sizeof(int)) == 0;
        print_comparison(&st[spec].core, &st[RUN_PLAIN].core, c->temperature == 0.0f, same);
        print_accounting(&st[spec], &st[RUN_PLAIN], K);
    }
    const Stats *tree = &st[RUN_TREE].core, *chain = &st[RUN_CHAIN].core;
    if (rc == 0 && c->compare && o->tree) // the tree against the chain of the same depth
        fprintf(stderr, "tree against chain      tokens per verify pass %.3f (tree) and %.3f "
                "(chain of K=%d); wall time %.3f, %.3f and %.3f ms (tree, chain, plain)\n",
                ratio(tree->round_tokens, tree->rounds), ratio(chain->round_tokens, chain->rounds),
                K, 1e3 * tree->seconds, 1e3 * chain->seconds, 1e3 * st[RUN_PLAIN].core.seconds);
out:
    for (int r = 0; r < N_RUNS; r++) free_tree_buffers(&tb[r]);
    free_all((void *[]){text[0], source}, 2);
    return rc;
}

#ifdef BEYOND_MAIN
// Parses the flags, loads the model, corpus and draft, checks every input, runs one action.
int main(int argc, char **argv) {
    program_name = "beyond"; // its messages' first word
    BeyondOptions o;
    BeyondLoaded ld = {0}; // zeroed, as are the drafts, so that done: frees however far we got
    Draft drafts[N_DRAFTS] = {0}; // the one --draft names; the self-test takes every kind
    char err[512] = ""; // a refusal's one line; done: prints it if something failed
    int rc = 1; // stays 1 until an action has run and succeeded
    // 1. the command line: every flag checked before anything is loaded
    if (parse_beyond_args(argc, argv, &o, err, sizeof(err)) != 0) goto done;
    if (o.core.help) { // a bad flag beside -h still fails, above
        beyond_usage(stdout);
        return close_stdout();
    }
    setvbuf(stdout, NULL, _IOLBF, 0); // self-test lines survive a sanitizer abort
    // 2. the model and corpus, then the checks that need them
    if (load_inputs(&o.core, &ld.core, NULL, err, sizeof(err)) != 0) goto done;
    if (check_beyond_inputs(&o, &ld, err, sizeof(err)) != 0) goto done;
    // 3. the draft --draft names (files tied to the target are checked before any widening);
    // the self-test builds every kind, each from its own file (Medusa's at its own depth) or,
    // where that file does not fit this model, in its untrained form (named with a 0:
    // medusa0, eagle0, ...); a kind this model cannot hold at all is skipped, with its reason
    DraftInputs in = {&ld.core.v, &ld.core.corpus, ld.core.g.config.block_size, &ld.core.g,
                      o.core.run_selftest ? 0 : ld.shape.depth, NULL};
    int n_drafts = o.core.run_selftest ? N_DRAFTS : 1;
    if (!o.core.run_selftest && setup_draft(o.draft, &in, &drafts[0], err, sizeof(err)) != 0)
        goto done;
    for (int i = 0; i < n_drafts && o.core.run_selftest; i++) {
        // the model drafts (gpt, cascade) read --draft's checkpoint, if it names one
        int own_file = !find_draft(o.draft) && DRAFTS[i].file &&
                       !strcmp(DRAFTS[i].file, DEFAULT_DRAFT);
        in.path = own_file ? o.draft : DRAFTS[i].file;
        int failed = setup_kind(&DRAFTS[i], &in, &drafts[i], err, sizeof(err)) != 0;
        if (failed && DRAFTS[i].untrained) {
            free_draft(&drafts[i]); // a file for another target: the untrained form instead
            in.path = NULL;
            failed = setup_kind(&DRAFTS[i], &in, &drafts[i], err, sizeof(err)) != 0;
            drafts[i].name = DRAFTS[i].untrained;
        }
        if (failed) { // the self-test leaves its cases out, and says why
            printf("SKIP %s: %s\n", DRAFTS[i].name, err);
            free_draft(&drafts[i]);
        }
        err[0] = '\0'; // a file the untrained form replaced is no reason to fail
    }
    for (int i = 0; i < n_drafts; i++) drafts[i].p_min = o.draft_p_min; // refused above if unusable
    if (setup_width(&o, &ld, err, sizeof(err)) != 0) goto done;
    // 4. every input is good: say what runs, then run it
    print_config(&ld.core.g, ld.source);
    rc = o.core.run_selftest ? beyond_selftest(&ld.core.g, drafts, n_drafts, &ld.core.corpus) != 0
                             : run_beyond(&o, &ld, &drafts[0], err, sizeof(err));
    if (rc == 1 && !err[0]) // unless it said why: a self-test's FAIL lines, or want of memory
        snprintf(err, sizeof(err), o.core.run_selftest ? "the self-test failed: its FAIL lines "
                 "are on stdout" : "out of memory for %d tokens", o.core.max_new_tokens);
done: // rc 1: err holds the reason; rc 2: stdout failed
    if (rc == 1 && err[0]) error_line("%s", err);
    for (int i = 0; i < N_DRAFTS; i++) free_draft(&drafts[i]);
    free((int *)ld.core.prompt.tok); // load_inputs's malloc
    free_corpus(&ld.core.corpus);
    free_gpt(&ld.core.g);
    return rc == 1 ? 1 : close_stdout();
}
#endif
