/*
 * test.h -- the C test harness: path-named cases ("/wire/msg/two_bodies"),
 * registered by constructors, run by main.c, driven from pytest
 * (tests/test_ctest.py) so pytest stays the single entry point.
 *
 *     MFT_CASE(two_bodies, "/wire/msg/two_bodies") { CHECK(x == 1); }
 *
 * A failed CHECK records file, line and expression and ends the case.
 */
#ifndef MF_TEST_H
#define MF_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void mft_register(const char *path, void (*fn)(void));
void mft_fail(const char *file, int line, const char *what);
bool mft_failed(void);
/* A fresh, empty temporary directory for this case (removed after it). */
const char *mft_tmpdir(void);

#define MFT_CASE(name, path)                                                      \
    static void name(void);                                                       \
    __attribute__((constructor)) static void name##_register(void)               \
    {                                                                             \
        mft_register(path, name);                                                 \
    }                                                                             \
    static void name(void)

#define CHECK(cond)                                                               \
    do {                                                                          \
        if (!(cond)) {                                                            \
            mft_fail(__FILE__, __LINE__, #cond);                                  \
            return;                                                               \
        }                                                                         \
    } while (0)

#define CHECK_INT(a, b)                                                           \
    do {                                                                          \
        long long a_ = (long long)(a), b_ = (long long)(b);                       \
        if (a_ != b_) {                                                           \
            char m_[256];                                                         \
            snprintf(m_, sizeof m_, "%s == %s (%lld != %lld)", #a, #b, a_, b_);   \
            mft_fail(__FILE__, __LINE__, m_);                                     \
            return;                                                               \
        }                                                                         \
    } while (0)

#define CHECK_STR(a, b)                                                           \
    do {                                                                          \
        const char *a_ = (a), *b_ = (b);                                          \
        if (!a_ || !b_ || strcmp(a_, b_) != 0) {                                  \
            char m_[2048];                                                         \
            snprintf(m_, sizeof m_, "%s == %s (\"%s\" != \"%s\")", #a, #b,        \
                     a_ ? a_ : "(null)", b_ ? b_ : "(null)");                     \
            mft_fail(__FILE__, __LINE__, m_);                                     \
            return;                                                               \
        }                                                                         \
    } while (0)

#endif /* MF_TEST_H */
