// SPDX-License-Identifier: MIT
/* Unit tests for common/file.c's spare inodes: a file removed through
 * file_unlink() becomes the next file made (the same inode, emptied, its
 * mode set), never through a name that is taken, a second link or a
 * symlink; the pool is bounded, starts empty, and directories go the same
 * way only when empty. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/file.h"

static char dir[64], pool[96];

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* Entries in the pool's directory (not . and ..). */
static int pool_entries(char first[64])
{
	struct dirent *de;
	DIR *d = opendir(pool);
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (first && !n)
			snprintf(first, 64, "%.60s", de->d_name);
		n++;
	}
	closedir(d);
	return n;
}

static ino_t ino_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_ino;
}

static void put_file(const char *name, const char *text, mode_t mode)
{
	char p[128];

	path_of(p, sizeof(p), name);
	assert_int_equal(file_write_atomic(p, text, strlen(text), mode), 0);
}

static void assert_content(const char *path, const char *want)
{
	char *buf;
	size_t len;

	assert_int_equal(file_read_all(path, 4096, &buf, &len), 0);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(buf, want, len);
	free(buf);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sluice-test-spare-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(pool, sizeof(pool), "%s/%s", dir, FILE_SPARE_DIR);
	assert_int_equal(file_spare_init_at(AT_FDCWD, pool), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	file_spare_end();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

/* The inode of a removed file is the next file's, emptied, with the new
 * file's mode, and the pool is empty again. */
static void test_reuse(void **state)
{
	char a[128], b[128];
	struct stat st;
	ino_t ino;

	(void)state;
	put_file("a", "the old contents", 0600);
	path_of(a, sizeof(a), "a");
	ino = ino_of(a);
	assert_int_equal(file_unlink(a), 0);
	assert_int_equal(access(a, F_OK), -1);
	assert_int_equal(file_spare_count(0), 1);
	assert_int_equal(pool_entries(NULL), 1);

	put_file("b", "new", 0644);
	path_of(b, sizeof(b), "b");
	assert_int_equal(lstat(b, &st), 0);
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_content(b, "new");
	assert_int_equal(file_spare_count(0), 0);
	assert_int_equal(pool_entries(NULL), 0);
	/* A missing file is ENOENT, as unlink says. */
	assert_int_equal(file_unlink(a), -ENOENT);
}

/* A name that is taken stays as it is, and the spare stays for the next. */
static void test_taken(void **state)
{
	char t[128];

	(void)state;
	put_file("taken", "keep me", 0600);
	put_file("spare", "x", 0600);
	path_of(t, sizeof(t), "spare");
	assert_int_equal(file_unlink(t), 0);
	path_of(t, sizeof(t), "taken");
	assert_int_equal(file_new_at(AT_FDCWD, t, 0600), -EEXIST);
	assert_content(t, "keep me");
	assert_int_equal(file_spare_count(0), 1);
	assert_int_equal(pool_entries(NULL), 1);
}

/* A file with a second name, and a symlink, are removed, never pooled: the
 * other name keeps its contents, the symlink's target too. */
static void test_not_pooled(void **state)
{
	char a[128], a2[128], victim[128], sl[128];

	(void)state;
	put_file("a", "shared", 0600);
	path_of(a, sizeof(a), "a");
	path_of(a2, sizeof(a2), "a2");
	assert_int_equal(link(a, a2), 0);
	assert_int_equal(file_unlink(a), 0);
	assert_int_equal(file_spare_count(0), 0);
	assert_content(a2, "shared");

	put_file("victim", "secret", 0600);
	path_of(victim, sizeof(victim), "victim");
	path_of(sl, sizeof(sl), "link");
	assert_int_equal(symlink(victim, sl), 0);
	assert_int_equal(file_unlink(sl), 0);
	assert_int_equal(file_spare_count(0), 0);
	assert_content(victim, "secret");
	assert_int_equal(pool_entries(NULL), 0);
}

/* A spare swapped behind the pool's back for a symlink (or a second link)
 * is not written through: the new file is made afresh. */
static void test_swapped_spare(void **state)
{
	char p[128], victim[128], name[64], in_pool[200];

	(void)state;
	put_file("victim", "secret", 0600);
	path_of(victim, sizeof(victim), "victim");
	put_file("s", "x", 0600);
	path_of(p, sizeof(p), "s");
	assert_int_equal(file_unlink(p), 0);
	assert_int_equal(pool_entries(name), 1);
	snprintf(in_pool, sizeof(in_pool), "%s/%s", pool, name);
	assert_int_equal(unlink(in_pool), 0);
	assert_int_equal(symlink(victim, in_pool), 0);
	put_file("c", "fresh", 0600);
	path_of(p, sizeof(p), "c");
	assert_content(p, "fresh");
	assert_content(victim, "secret");

	/* The same with a hard link to the victim. */
	put_file("s", "x", 0600);
	path_of(p, sizeof(p), "s");
	assert_int_equal(file_unlink(p), 0);
	assert_int_equal(pool_entries(name), 1);
	snprintf(in_pool, sizeof(in_pool), "%s/%s", pool, name);
	assert_int_equal(unlink(in_pool), 0);
	assert_int_equal(link(victim, in_pool), 0);
	put_file("d", "fresh", 0600);
	path_of(p, sizeof(p), "d");
	assert_content(p, "fresh");
	assert_content(victim, "secret");
}

/* At most 64 files are kept; the rest are removed. */
static void test_bounded(void **state)
{
	char name[16], p[128];
	int i;

	(void)state;
	for (i = 0; i < 70; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		put_file(name, "data", 0600);
	}
	for (i = 0; i < 70; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		path_of(p, sizeof(p), name);
		assert_int_equal(file_unlink(p), 0);
		assert_int_equal(access(p, F_OK), -1);
	}
	assert_int_equal(file_spare_count(0), 64);
	assert_int_equal(pool_entries(NULL), 64);
}

/* Directories: only an empty one is kept, and given back with its mode set. */
static void test_dirs(void **state)
{
	char d1[128], d2[128], f[200], name[64];
	struct stat st;
	ino_t ino;

	(void)state;
	path_of(d1, sizeof(d1), "d1");
	assert_int_equal(file_mkdir(d1, 0700), 0);
	ino = ino_of(d1);
	snprintf(f, sizeof(f), "%s/inside", d1);
	assert_int_equal(file_write_atomic(f, "x", 1, 0600), 0);
	assert_int_equal(file_rmdir(d1), -ENOTEMPTY);
	assert_int_equal(file_spare_count(1), 0);
	assert_int_equal(access(f, F_OK), 0);
	assert_int_equal(unlink(f), 0);
	assert_int_equal(file_rmdir(d1), 0);
	assert_int_equal(access(d1, F_OK), -1);
	assert_int_equal(file_spare_count(1), 1);

	path_of(d2, sizeof(d2), "d2");
	assert_int_equal(file_mkdir(d2, 0750), 0);
	assert_int_equal(lstat(d2, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(st.st_ino, ino);
	assert_int_equal(st.st_mode & 07777, 0750);
	assert_int_equal(file_spare_count(1), 0);
	/* Taken names stay so. */
	assert_int_equal(file_rmdir(d1), -ENOENT);
	assert_int_equal(file_mkdir(d2, 0700), -EEXIST);

	/* A spare directory that something was put in since is not given
	 * as a new one: the mkdir fails, and what was put there stays. */
	assert_int_equal(file_rmdir(d2), 0);
	assert_int_equal(pool_entries(name), 1);
	snprintf(f, sizeof(f), "%s/%s/planted", pool, name);
	assert_int_equal(file_write_atomic(f, "p", 1, 0600), 0);
	assert_int_equal(file_mkdir(d1, 0700), -ENOTEMPTY);
	snprintf(f, sizeof(f), "%s/planted", d1);
	assert_content(f, "p");
}

/* A new pool starts empty, whatever the directory held; one that others
 * may write to is refused, and then nothing is kept. */
static void test_init(void **state)
{
	char p[128];

	(void)state;
	put_file("a", "x", 0600);
	path_of(p, sizeof(p), "a");
	assert_int_equal(file_unlink(p), 0);
	assert_int_equal(pool_entries(NULL), 1);
	assert_int_equal(file_spare_init_at(AT_FDCWD, pool), 0);
	assert_int_equal(pool_entries(NULL), 0);
	assert_int_equal(file_spare_count(0), 0);

	file_spare_end();
	assert_int_equal(chmod(pool, 0777), 0);
	assert_int_equal(file_spare_init_at(AT_FDCWD, pool), -EPERM);
	put_file("b", "x", 0600);
	path_of(p, sizeof(p), "b");
	assert_int_equal(file_unlink(p), 0);
	assert_int_equal(pool_entries(NULL), 0);
	assert_int_equal(file_spare_count(0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_taken, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_pooled, setup, teardown),
		cmocka_unit_test_setup_teardown(test_swapped_spare, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dirs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_init, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
