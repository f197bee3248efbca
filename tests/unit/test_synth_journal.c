// SPDX-License-Identifier: MIT
/* Unit tests for the synthetic-names journal (dnsfilter/synth.c): after a
 * replay of a damaged journal (torn lines in the middle, a cut at every
 * byte, a missing file, the format from before checksums), no name has
 * another name's address and no address given before goes to a new name. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/addr.h"
#include "common/file.h"
#include "dnsfilter/dnsfilter.h"

#define NAMES 40

struct jx {
	char dir[64], path[96];
	struct sl_addr net;
	unsigned plen;
	char name[NAMES][32];
	struct sl_addr given[NAMES]; /* what the first map gave each name */
	char *file;		     /* the good journal's bytes */
	size_t len;
};

static struct dns_synth *new_map(struct jx *x)
{
	struct dns_synth *s = dns_synth_new(&x->net, x->plen, DNS_SYNTH_MAX_NAMES);

	assert_non_null(s);
	return s;
}

static void write_file(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* A journal of NAMES names, given in order by a map as the broker uses it. */
static int setup(void **state)
{
	struct jx *x = calloc(1, sizeof(*x));
	struct dns_synth *s;
	int i;

	assert_non_null(x);
	snprintf(x->dir, sizeof(x->dir), "/tmp/synthj.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/s.names", x->dir);
	assert_int_equal(addr_parse_cidr("198.18.0.0/15", &x->net, &x->plen), 0);
	s = new_map(x);
	assert_int_equal(dns_synth_journal(s, x->path, false, NULL), 0);
	for (i = 0; i < NAMES; i++) {
		snprintf(x->name[i], sizeof(x->name[i]), "host%02d.wild.test", i);
		assert_int_equal(dns_synth_get(s, x->name[i], &x->given[i]), 0);
	}
	dns_synth_free(s);
	assert_int_equal(file_read_all(x->path, 1 << 20, &x->file, &x->len), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct jx *x = *state;
	char tmp[128];

	unlink(x->path);
	snprintf(tmp, sizeof(tmp), "%s.tmp", x->path);
	unlink(tmp);
	snprintf(tmp, sizeof(tmp), "%s.hwm", x->path);
	unlink(tmp);
	rmdir(x->dir);
	free(x->file);
	free(x);
	return 0;
}

static bool was_given(const struct jx *x, const struct sl_addr *a)
{
	for (int i = 0; i < NAMES; i++)
		if (!memcmp(&x->given[i], a, sizeof(*a)))
			return true;
	return false;
}

/*
 * Replays @buf and checks what a user would: an address the first map gave
 * is now either its own name's or nobody's; every name asked again gets
 * its old address or one that was never given; a new name gets an address
 * never given. Returns how many names kept their address.
 */
static int replay_and_check(struct jx *x, const char *buf, size_t len, struct dns_synth_replay *rep)
{
	struct dns_synth *s = new_map(x);
	char got[DNS_NAME_TEXT_MAX + 1];
	struct sl_addr a, fresh[NAMES + 1];
	int i, kept = 0;

	write_file(x->path, buf, len);
	assert_int_equal(dns_synth_journal(s, x->path, true, rep), 0);
	for (i = 0; i < NAMES; i++) {
		int r = dns_synth_name(s, &x->given[i], got, sizeof(got));

		if (r == 0) {
			assert_string_equal(got, x->name[i]);
			kept++;
		} else {
			assert_int_equal(r, -ENOENT);
		}
	}
	for (i = 0; i < NAMES; i++) {
		assert_int_equal(dns_synth_get(s, x->name[i], &a), 0);
		if (memcmp(&a, &x->given[i], sizeof(a)))
			assert_false(was_given(x, &a));
		fresh[i] = a;
	}
	assert_int_equal(dns_synth_get(s, "brand-new.wild.test", &fresh[NAMES]), 0);
	assert_false(was_given(x, &fresh[NAMES]));
	/* And no two names share an address. */
	for (i = 0; i <= NAMES; i++)
		for (int j = i + 1; j <= NAMES; j++)
			assert_memory_not_equal(&fresh[i], &fresh[j], sizeof(fresh[i]));
	dns_synth_free(s);
	return kept;
}

static void test_journal_roundtrip(void **state)
{
	struct jx *x = *state;
	struct dns_synth_replay rep;

	assert_int_equal(replay_and_check(x, x->file, x->len, &rep), NAMES);
	assert_false(rep.damaged);
	assert_false(rep.legacy);
	assert_int_equal(rep.kept, NAMES);
	assert_int_equal(rep.lost, 0);
}

/* The start of line @n (0 is the header) in @buf. */
static char *line_at(char *buf, int n)
{
	while (n-- > 0)
		buf = strchr(buf, '\n') + 1;
	return buf;
}

/* Two torn lines in the middle: each cut short (its tail and newline
 * gone, so it runs into the next record), as a short append leaves it. The
 * names after them keep their addresses. */
static void test_journal_two_torn_lines(void **state)
{
	struct jx *x = *state;
	struct dns_synth_replay rep;
	char *copy = malloc(x->len), *a, *a_end, *b, *b_end, *o;
	size_t n;
	int kept;

	assert_non_null(copy);
	a = line_at(x->file, 10);
	a_end = strchr(a, '\n') + 1;
	b = line_at(x->file, 25);
	b_end = strchr(b, '\n') + 1;
	o = copy;
	n = (size_t)(a - x->file) + 12; /* line 10 torn after 12 bytes */
	memcpy(o, x->file, n);
	o += n;
	n = (size_t)(b - a_end) + 20; /* up to line 25, torn after 20 bytes */
	memcpy(o, a_end, n);
	o += n;
	n = x->len - (size_t)(b_end - x->file);
	memcpy(o, b_end, n);
	o += n;
	kept = replay_and_check(x, copy, (size_t)(o - copy), &rep);
	assert_true(rep.damaged);
	assert_true(rep.lost >= 2);
	/* At most the two torn records and the ones they ran into are lost. */
	assert_true(kept >= NAMES - 4);
	free(copy);
}

/* Cut at every byte: never a name at another's address, never an address
 * given again. */
static void test_journal_truncated_everywhere(void **state)
{
	struct jx *x = *state;
	struct dns_synth_replay rep;
	size_t cut;

	for (cut = 0; cut < x->len; cut++)
		replay_and_check(x, x->file, cut, &rep);
}

/* One byte flipped in each line in turn (a record's offset among them). */
static void test_journal_flipped(void **state)
{
	struct jx *x = *state;
	struct dns_synth_replay rep;
	char *copy = malloc(x->len);
	size_t i;

	assert_non_null(copy);
	for (i = 0; i < x->len; i += 7) {
		memcpy(copy, x->file, x->len);
		copy[i] ^= 0x04;
		replay_and_check(x, copy, x->len, &rep);
		assert_true(rep.damaged || rep.legacy);
	}
	free(copy);
}

/* The journal of sluice 0.x: a name a line, the n-th name offset n; a bad
 * line keeps its offset. Read once, then rewritten in the checked format. */
static void test_journal_legacy(void **state)
{
	static const char old[] = "a.wild.test\nnot a name\nb.wild.test\n";
	struct jx *x = *state;
	struct dns_synth_replay rep;
	struct dns_synth *s = new_map(x);
	char got[DNS_NAME_TEXT_MAX + 1], *buf;
	struct sl_addr a;
	size_t len;
	int round;

	write_file(x->path, old, sizeof(old) - 1);
	for (round = 0; round < 2; round++) {
		assert_int_equal(dns_synth_journal(s, x->path, true, &rep), 0);
		assert_int_equal(rep.legacy, round == 0);
		assert_int_equal(rep.kept, 2);
		a = x->net;
		a.b[15] = 1;
		assert_int_equal(dns_synth_name(s, &a, got, sizeof(got)), 0);
		assert_string_equal(got, "a.wild.test");
		a.b[15] = 2;
		assert_int_equal(dns_synth_name(s, &a, got, sizeof(got)), -ENOENT);
		a.b[15] = 3;
		assert_int_equal(dns_synth_name(s, &a, got, sizeof(got)), 0);
		assert_string_equal(got, "b.wild.test");
		assert_int_equal(file_read_all(x->path, 1 << 20, &buf, &len), 0);
		assert_non_null(strstr(buf, "sluice-state 1 names"));
		free(buf);
		dns_synth_free(s);
		s = new_map(x);
	}
	dns_synth_free(s);
}

/* A journal that cannot grow (a full disk, here RLIMIT_FSIZE): a new name
 * whose address cannot be reserved is refused with -EIO (the filter's
 * `synthetic-journal-failed`), never given an address a restart could give
 * to another name; names that have one keep it. */
static void test_journal_full(void **state)
{
	struct jx *x = *state;
	struct dns_synth *s = new_map(x);
	struct dns_synth_replay rep;
	struct rlimit old, lim;
	struct sl_addr a, first[64];
	char name[64];
	struct stat st;
	int i, n = 0, r = 0;

	unlink(x->path);
	assert_int_equal(dns_synth_journal(s, x->path, false, NULL), 0);
	assert_int_equal(stat(x->path, &st), 0);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)st.st_size + 400; /* a mark and a few names */
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	for (i = 0; i < 64; i++) {
		snprintf(name, sizeof(name), "full%02d.wild.test", i);
		r = dns_synth_get(s, name, &first[i]);
		if (r < 0)
			break;
		n++;
	}
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	signal(SIGXFSZ, SIG_DFL);
	assert_int_equal(r, -EIO);
	assert_true(n >= 16); /* the first mark covers 16 */
	/* Those kept their addresses; a restart gives none of them away. */
	for (i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "full%02d.wild.test", i);
		assert_int_equal(dns_synth_get(s, name, &a), 0);
		assert_memory_equal(&a, &first[i], sizeof(a));
	}
	dns_synth_free(s);
	s = new_map(x);
	assert_int_equal(dns_synth_journal(s, x->path, true, &rep), 0);
	assert_int_equal(dns_synth_get(s, "after.wild.test", &a), 0);
	for (i = 0; i < n; i++)
		assert_memory_not_equal(&a, &first[i], sizeof(a));
	dns_synth_free(s);
}

static void test_journal_missing(void **state)
{
	struct jx *x = *state;
	struct dns_synth_replay rep;
	struct dns_synth *s = new_map(x);

	unlink(x->path);
	assert_int_equal(dns_synth_journal(s, x->path, true, &rep), 0);
	assert_true(rep.missing);
	assert_int_equal(rep.kept, 0);
	dns_synth_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_journal_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_two_torn_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_truncated_everywhere, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_flipped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_legacy, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_journal_missing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
