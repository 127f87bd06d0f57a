/* Cases for csrc/storage. */
#include "test.h"
#include "../storage/storage.h"

#include <unistd.h>

MFT_CASE(lock_exclusive, "/storage/os/dir_lock_is_exclusive")
{
    char dir[512];
    mf_error err;
    int fd1 = -1, fd2 = -1;
    snprintf(dir, sizeof dir, "%s/a/b/db", mft_tmpdir());
    CHECK_INT(mf_os_dir_lock(dir, &fd1, &err), 0); /* creates the parents */
    CHECK_INT(mf_os_dir_lock(dir, &fd2, &err), MF_DBPathInUse);
    CHECK(strstr(err.msg, dir) != NULL);
    mf_os_dir_unlock(fd1);
    CHECK_INT(mf_os_dir_lock(dir, &fd2, &err), 0);
    mf_os_dir_unlock(fd2);
}

MFT_CASE(lock_not_a_dir, "/storage/os/dir_lock_rejects_a_file")
{
    char path[512];
    mf_error err;
    int fd = -1;
    snprintf(path, sizeof path, "%s/file", mft_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fclose(f);
    CHECK(mf_os_dir_lock(path, &fd, &err) != 0);
    CHECK(fd == -1);
}
