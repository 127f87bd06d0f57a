/* Cases for the logical-session registry (command/sessions.c): the digest,
 * expiry by idle time, ending and killing. */
#include "test.h"
#include "cmdtest.h"

#include <stdlib.h>

static mf_instance *open_instance(void)
{
    return mft_instance_open(false);
}

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
}

MFT_CASE(sessions_sha256, "command/sessions/sha256")
{
    uint8_t d[32];
    char h[65];
    mfi_sha256("", 0, d);
    hex(d, 32, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    mfi_sha256("abc", 3, d);
    hex(d, 32, h);
    CHECK_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* two blocks of padding (56 bytes) and several blocks */
    const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    mfi_sha256(m, strlen(m), d);
    hex(d, 32, h);
    CHECK_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char big[1000];
    memset(big, 'a', sizeof big);
    mfi_sha256(big, sizeof big, d);
    hex(d, 32, h);
    CHECK_STR(h, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    mfi_session_user_digest("", "", d);
    hex(d, 32, h);
    CHECK_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    uint8_t e[32];
    mfi_session_user_digest("alice", "admin", d);
    mfi_sha256("alice@admin", 11, e);
    CHECK(memcmp(d, e, 32) == 0);
}

MFT_CASE(sessions_expiry, "command/sessions/expiry")
{
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_error err;
    uint8_t id[16] = {1}, id2[16] = {2}, uid[32];
    mfi_session_user_digest("", "", uid);
    mfi_sessions_set_timeout_ms(inst, 1000);
    CHECK_INT(mfi_sessions_touch(inst, id, uid, 10000, &err), 0);
    CHECK_INT(mfi_sessions_touch(inst, id2, uid, 10500, &err), 0);
    CHECK_INT(mfi_sessions_count(inst, 10900), 2);
    CHECK_INT(mfi_sessions_count(inst, 11000), 2);  /* idle exactly the timeout: alive */
    CHECK_INT(mfi_sessions_count(inst, 11001), 1);  /* the first is gone */
    /* a use refreshes: id2 used at 11400 lives to 12400 */
    CHECK_INT(mfi_sessions_touch(inst, id2, uid, 11400, &err), 0);
    CHECK_INT(mfi_sessions_count(inst, 12400), 1);
    CHECK_INT(mfi_sessions_count(inst, 12401), 0);
    mf_instance_close(inst);
}

MFT_CASE(sessions_many, "command/sessions/many")
{
    /* the table grows and sweeps while sessions come and go */
    mf_instance *inst = open_instance();
    CHECK(inst);
    mf_error err;
    uint8_t id[16] = {0}, uid[32];
    mfi_session_user_digest("", "", uid);
    mfi_sessions_set_timeout_ms(inst, 100);
    for (uint32_t i = 0; i < 5000; i++) {
        memcpy(id, &i, sizeof i);
        CHECK_INT(mfi_sessions_touch(inst, id, uid, 1000 + i / 10, &err), 0);
    }
    /* at time 1499 the last use was 1499; live: used at >= 1399 */
    CHECK_INT(mfi_sessions_count(inst, 1499), 1010); /* i >= 3990 */
    for (uint32_t i = 4000; i < 4010; i++) {
        memcpy(id, &i, sizeof i);
        mfi_sessions_end(inst, id, uid);
    }
    CHECK_INT(mfi_sessions_count(inst, 1499), 1000);
    uint8_t other[32];
    mfi_session_user_digest("a", "b", other);
    mfi_sessions_kill(inst, (const uint8_t(*)[32])other, 1, false);
    CHECK_INT(mfi_sessions_count(inst, 1499), 1000);
    mfi_sessions_kill(inst, (const uint8_t(*)[32])uid, 1, false);
    CHECK_INT(mfi_sessions_count(inst, 1499), 0);
    mf_instance_close(inst);
}
