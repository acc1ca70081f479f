/*
 * test/check.h: the one-line PASS/FAIL report every C test prints (test/run_tests.sh
 * counts those lines). Include it after "../specdec.c".
 */
#include <stdarg.h>

// SANITIZED is 1 in an AddressSanitizer build: the forward pass runs 20-50x slower there,
// so the model-heavy tests run fewer tokens (the checks stay the same).
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

static int n_passed, n_failed;

// Prints one PASS/FAIL line for a check and counts it; returns ok.
static int check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(int ok, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs(ok ? "PASS " : "FAIL ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    if (ok) n_passed++;
    else n_failed++;
    return ok;
}
