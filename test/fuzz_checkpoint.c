/*
 * test/fuzz_checkpoint.c: a libFuzzer target for the two file loaders, the checkpoint
 * (parse_checkpoint, load_checkpoint, in specdec.c) and the training state
 * (load_train_state, in tinyshakespeare/train.c, which includes beyond.c, and so specdec.c,
 * whole).
 *
 * A loader reads bytes that anyone can hand it, so whatever they are it must return
 * cleanly, leak nothing, and accept only a file that passes every check its format
 * promises. This target asserts exactly that: a rejection leaves a non-empty one-line
 * message; an acceptance is re-checked here, independently of the loader (header,
 * config bounds, parameter count, size, checksum, vocabulary order, finite
 * parameters), and the accepted model is written back out and must give the same
 * bytes. ASan, UBSan and LeakSanitizer catch the rest. Any violation aborts, which
 * libFuzzer reports as a crash.
 *
 * Input: the first byte chooses what the rest is fed to (its low 7 bits, modulo 6):
 *   0  parse_checkpoint, bytes as given
 *   1  parse_checkpoint, the trailing FNV-1a checksum recomputed first
 *   2  parse_checkpoint, the file cut or zero-padded to the size its header's config
 *      needs (when that is at most FIT_MAX bytes), then the checksum recomputed
 *   3  load_checkpoint on a file holding the bytes, checksum recomputed
 *   4  load_train_state on a file holding the bytes, as given
 *   5  load_train_state, checksum recomputed
 * Almost every mutation breaks the checksum, which the loaders check early; without
 * modes 1, 2, 3 and 5 the checks behind it (vocabulary order, finite parameters,
 * pairing and ranges of a training state) would hardly ever run. Mode 2 lets a mutated
 * config be tried at the size it asks for, which plain byte mutations cannot reach.
 * For a training state the parameter count P comes from the file's size and the
 * checkpoint checksum it must pair with from its own bytes 32..39; the first byte's top
 * bit asks for a checksum one off instead, so the "different checkpoint" refusal runs too.
 *
 * The loaders that take a path read an unlinked temporary file through
 * /proc/self/fd/N (Linux), so no input ever leaves a file behind.
 *
 * Build and run: test/fuzz_test.sh (make fuzz; briefly in make test). Seeds are small
 * valid files made by test/fuzz_seeds.c, nothing committed. Replay one input:
 *   test/build/fuzz_checkpoint FILE
 */
#define TESTING // leaves out the trainer's main, beyond.c's and specdec.c's
#include "../tinyshakespeare/train.c" // specdec.c (through beyond.c), and the trainer's save side

#define FIT_MAX (64 * 1024) // mode 2 never builds a file larger than this: keeps runs fast
#define ERRLEN 256           // what load_checkpoint gives parse_checkpoint (its why[256])

// Prints what broke and aborts: libFuzzer saves the input that did it.
static void fail(const char *what, const char *detail) {
    fprintf(stderr, "fuzz_checkpoint: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    abort();
}

// A rejection must say why, in one line: main prints it as "specdec: <err>".
static void check_message(const char *err, size_t errlen) {
    size_t n = strnlen(err, errlen);
    if (n == 0) fail("rejected without a message", NULL);
    if (n == errlen) fail("message is not NUL-terminated within errlen", NULL);
    if (memchr(err, '\n', n)) fail("message is more than one line", err);
}

// Little-endian reads of our own, so the checks below do not lean on specdec.c's.
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

// FNV-1a 64, written again from its definition.
static uint64_t fnv(const unsigned char *p, size_t n) {
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

// Overwrites the last 8 bytes with the FNV-1a 64 of the bytes before them.
static void fix_sum(unsigned char *buf, size_t n) {
    if (n < 8) return;
    uint64_t h = fnv(buf, n - 8);
    for (int i = 0; i < 8; i++) buf[n - 8 + i] = (unsigned char)(h >> (8 * i));
}

// The parameter count of a config, from the lecture's module list (per block: ln1 2C,
// query/key/value 3C^2, proj C^2 + C, ln2 2C, MLP 8C^2 + 5C), not from weight_sizes.
static uint64_t param_count(uint64_t L, uint64_t C, uint64_t S, uint64_t V) {
    return V * C + S * C + L * (12 * C * C + 10 * C) + 2 * C + C * V + V;
}

// The size a checkpoint with this header must have, or 0 if the header is no use.
static uint64_t fitted_size(const unsigned char *buf, size_t n) {
    if (n < 28) return 0;
    uint64_t f[5];
    for (int i = 0; i < 5; i++) f[i] = le32(buf + 8 + 4 * i);
    for (int i = 0; i < 5; i++) if (f[i] > 4096) return 0;
    return 28 + f[4] + 4 * param_count(f[0], f[2], f[3], f[4]) + 8;
}

// The one temporary file the path loaders read: created, unlinked, named by its fd.
static int tmp_fd = -1;
static char tmp_path[64];

static void open_tmp(void) {
    if (tmp_fd >= 0) return;
    const char *dir = getenv("TMPDIR");
    char name[4096];
    snprintf(name, sizeof(name), "%s/specdec_fuzz.XXXXXX", dir && *dir ? dir : "/tmp");
    tmp_fd = mkstemp(name);
    if (tmp_fd < 0) fail("mkstemp failed", strerror(errno));
    unlink(name); // gone from the directory at once; the fd keeps the data
    snprintf(tmp_path, sizeof(tmp_path), "/proc/self/fd/%d", tmp_fd);
    struct stat st;
    if (stat(tmp_path, &st) != 0) fail("cannot stat /proc/self/fd/N (is /proc mounted?)", tmp_path);
}

// Makes the temporary file hold exactly buf[0..n).
static void write_tmp(const unsigned char *buf, size_t n) {
    open_tmp();
    if (ftruncate(tmp_fd, 0) != 0) fail("ftruncate failed", strerror(errno));
    size_t done = 0;
    while (done < n) {
        ssize_t w = pwrite(tmp_fd, buf + done, n - done, (off_t)done);
        if (w <= 0) fail("pwrite failed", strerror(errno));
        done += (size_t)w;
    }
}

// An accepted checkpoint, checked again from the bytes up: everything the format
// promises, then the model written back out must be the same bytes.
static void check_accepted(const unsigned char *buf, size_t n, GPT *g, const Vocab *v) {
    if (n < 36 || memcmp(buf, "SPDC", 4) != 0 || le32(buf + 4) != 1)
        fail("accepted a file without the SPDC version 1 header", NULL);
    char err[ERRLEN];
    if (check_config(&g->config, err, sizeof(err)) != 0) fail("accepted a bad config", err);
    const Config *c = &g->config;
    uint32_t f[5] = {(uint32_t)c->n_layer, (uint32_t)c->n_head, (uint32_t)c->n_embd,
                     (uint32_t)c->block_size, (uint32_t)c->vocab_size};
    for (int i = 0; i < 5; i++)
        if (le32(buf + 8 + 4 * i) != f[i]) fail("config differs from the header", NULL);
    if (c->n_embd % c->n_head != 0) fail("accepted n_embd not a multiple of n_head", NULL);
    uint64_t P = param_count(f[0], f[2], f[3], f[4]), V = f[4];
    if (g->n_params != P) fail("parameter count differs from the module list", NULL);
    if (n != 28 + V + 4 * P + 8) fail("accepted a file of the wrong size", NULL);
    if (fnv(buf, n - 8) != le64(buf + n - 8)) fail("accepted a file with a bad checksum", NULL);
    // vocabulary: strictly ascending, and id[] its exact inverse
    if (v->size != (int)V) fail("vocabulary size differs from the config", NULL);
    int mapped = 0;
    for (int b = 0; b < 256; b++) mapped += v->id[b] >= 0;
    if (mapped != v->size) fail("id[] maps a byte outside the vocabulary", NULL);
    for (uint64_t i = 0; i < V; i++) {
        if (v->chars[i] != buf[28 + i] || v->id[v->chars[i]] != (int)i)
            fail("vocabulary differs from the file", NULL);
        if (i > 0 && buf[28 + i] <= buf[28 + i - 1]) fail("accepted an unsorted vocabulary", NULL);
    }
    // parameters: every one finite, bit for bit what the file holds
    for (uint64_t i = 0; i < P; i++) {
        uint32_t bits = le32(buf + 28 + V + 4 * i), have;
        memcpy(&have, &g->params[i], 4);
        if (have != bits) fail("a parameter differs from the file", NULL);
        if (!isfinite(g->params[i])) fail("accepted a parameter that is not finite", NULL);
    }
    size_t m;
    unsigned char *again = serialize_checkpoint(g, v, &m);
    if (!again) fail("out of memory re-serialising", NULL);
    if (m != n || memcmp(again, buf, n) != 0) fail("writing the model back gives other bytes", NULL);
    free(again);
    // the run state was built for this config: one token through the model touches the
    // embeddings, every block and lm_head (ASan checks the buffers' sizes)
    int tok = (int)(V - 1);
    g->state.cache_len = 0;
    forward(g, &tok, 1);
}

// Modes 0-3: the checkpoint, parsed from memory or loaded from the temporary file.
static void fuzz_checkpoint(const unsigned char *buf, size_t n, int via_file) {
    GPT g;
    Vocab v;
    memset(&g, 0, sizeof(g));
    memset(&v, 0, sizeof(v));
    char err[ERRLEN * 2];
    err[0] = '\0';
    int rc;
    if (via_file) {
        write_tmp(buf, n);
        rc = load_checkpoint(tmp_path, &g, &v, err, sizeof(err));
        if (rc != 0 && strncmp(err, "checkpoint '", 12) != 0)
            fail("load_checkpoint's message does not name the checkpoint", err);
    } else {
        rc = parse_checkpoint(buf, n, &g, &v, err, ERRLEN);
    }
    if (rc == 0) check_accepted(buf, n, &g, &v);
    else if (rc == -1) check_message(err, via_file ? sizeof(err) : ERRLEN);
    else fail("returned neither 0 nor -1", NULL);
    free_gpt(&g);
}

// Modes 4-5: the training state, for P and the pairing checksum the file itself implies.
static void fuzz_train_state(const unsigned char *buf, size_t n, int mispair) {
    size_t P = n >= 56 && (n - 56) % 8 == 0 ? (n - 56) / 8 : 1;
    uint64_t sum = (n >= 40 ? le64(buf + 32) : 0) ^ (uint64_t)mispair;
    TrainProgress p;
    if (build_train_progress(&p, P, 3, 99) != 0) fail("out of memory", NULL);
    TrainProgress before = p;
    char err[ERRLEN * 2];
    err[0] = '\0';
    write_tmp(buf, n);
    int rc = load_train_state(&p, P, sum, tmp_path, err, sizeof(err));
    if (rc == 0) {
        // accepted: every check of the format holds, and p holds what the file says
        if (n != 48 + 8 * P + 8 || memcmp(buf, "SPDS", 4) != 0 || le32(buf + 4) != 1 ||
            fnv(buf, n - 8) != le64(buf + n - 8))
            fail("accepted a training state with a bad size, header or checksum", NULL);
        if (le64(buf + 32) != sum || le64(buf + 40) != P)
            fail("accepted a training state paired with another checkpoint", NULL);
        if (p.batch < 1 || p.batch > 4096 || (uint32_t)p.batch != le32(buf + 8) ||
            p.opt.step < 0 || p.opt.step > 10000000 || (uint64_t)p.opt.step != le64(buf + 16) ||
            p.rng.state == 0 || p.rng.state != le64(buf + 24) || p.ckpt_sum != sum)
            fail("accepted batch, step or generator state out of range or misread", NULL);
        for (size_t i = 0; i < P; i++) {
            uint32_t m, v;
            memcpy(&m, &p.opt.m[i], 4);
            memcpy(&v, &p.opt.v[i], 4);
            if (m != le32(buf + 48 + 4 * i) || v != le32(buf + 48 + 4 * (P + i)))
                fail("a moment differs from the file", NULL);
        }
    } else if (rc == -1) {
        check_message(err, sizeof(err));
        // a refused state must leave the caller's progress as it was
        if (p.batch != before.batch || p.opt.step != before.opt.step ||
            p.rng.state != before.rng.state || p.ckpt_sum != before.ckpt_sum)
            fail("a refused training state changed the progress", NULL);
        for (size_t i = 0; i < P; i++)
            if (p.opt.m[i] != 0.0f || p.opt.v[i] != 0.0f) fail("a refused state wrote moments", NULL);
    } else {
        fail("load_train_state returned neither 0 nor -1", NULL);
    }
    free_train_progress(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int mode = (data[0] & 0x7f) % 6, top = data[0] >> 7;
    size_t n = size - 1;
    // mode 2 may grow the file; otherwise a private copy of the input, exactly n bytes
    // long (malloc'd, so ASan sees a read one past its end)
    uint64_t fit = mode == 2 ? fitted_size(data + 1, n) : 0;
    size_t len = fit && fit <= FIT_MAX ? (size_t)fit : n;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) return 0;
    memset(buf, 0, len);
    memcpy(buf, data + 1, n < len ? n : len);
    if (mode == 1 || mode == 2 || mode == 3 || mode == 5) fix_sum(buf, len);
    if (mode <= 3) fuzz_checkpoint(buf, len, mode == 3);
    else fuzz_train_state(buf, len, top);
    free(buf);
    return 0;
}
