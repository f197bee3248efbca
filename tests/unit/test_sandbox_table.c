// SPDX-License-Identifier: MIT
/* Unit tests for the broker's table of sandboxes (broker/sandbox.c), built
 * here with a table of 64 slots so that entries collide: look-ups by
 * address and by name after removals from the middle of a run, churn with
 * names never seen before, and the pool's allocation of addresses (the
 * lowest free /30, full pool, a freed block given out again). */

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#define SANDBOX_HASH_SLOTS 64
#include "broker/sandbox.c"

#define SLOTS SANDBOX_HASH_SLOTS

/* The table under test: an object of its own, no broker around it. */
static struct sandbox_table *T;
static char dir[64], policy_path[128];
static bool present[4096];
static struct sl_addr addr_of[4096];

static void name_of(unsigned i, char *buf, size_t len)
{
	snprintf(buf, len, "sb-%u", i);
}

static struct broker_config cfg;

static int setup(void **state)
{
	FILE *f;

	(void)state;
	log_threshold = LOG_LVL_WARN; /* a line per registration is noise here */
	snprintf(dir, sizeof(dir), "/tmp/sluice-unit-sbtab-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(policy_path, sizeof(policy_path), "%s/p.yaml", dir);
	f = fopen(policy_path, "w");
	assert_non_null(f);
	fputs("version: 1\negress:\n  allow:\n    - host: example.com\n", f);
	fclose(f);
	broker_config_defaults(&cfg);
	snprintf(cfg.state_dir, sizeof(cfg.state_dir), "%s/state", dir);
	/* A /26: 16 blocks of /30, so that the pool can be filled. */
	assert_int_equal(addr_parse_cidr("10.77.0.0/26", &cfg.pool_net, &cfg.pool_plen), 0);
	assert_int_equal(sandbox_table_new(&cfg, &T), 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	sandbox_table_free(T);
	T = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int reg(unsigned i, const char *addr)
{
	struct sl_err err;
	char name[32];
	struct sl_addr got;
	int r;

	name_of(i, name, sizeof(name));
	r = sandbox_register(T, name, addr, policy_path, true, &got, &err);
	if (r == 0) {
		present[i] = true;
		addr_of[i] = got;
	}
	return r;
}

static void unreg(unsigned i)
{
	struct sl_err err;
	char name[32];

	name_of(i, name, sizeof(name));
	assert_int_equal(sandbox_unregister(T, name, &err), 0);
	present[i] = false;
}

/* sandbox_each()'s visits, by number: each present one once. (Nothing
 * is asserted in the callback: a failure would leave the table's lock
 * held.) */
static unsigned visits[4096], strange_visits;

static void visit(const struct sandbox *sb, void *arg)
{
	unsigned i;

	(void)arg;
	if (sscanf(sb->name, "sb-%u", &i) == 1 && i < 4096)
		visits[i]++;
	else
		strange_visits++;
}

/* Every sandbox of @present is found by address and by name, with its
 * own address, and visited once by sandbox_each(); no other one is. */
static void check_all(unsigned upto)
{
	unsigned i, n = 0;

	memset(visits, 0, sizeof(visits));
	strange_visits = 0;
	sandbox_each(T, visit, NULL);
	assert_int_equal(strange_visits, 0);
	for (i = 0; i < 4096; i++)
		assert_int_equal(visits[i], i < upto && present[i] ? 1 : 0);

	for (i = 0; i < upto; i++) {
		char name[32];
		struct policy *pol = NULL;
		struct sandbox *sb;
		char *pem = NULL;

		name_of(i, name, sizeof(name));
		sb = present[i] ? sandbox_lookup(T, &addr_of[i], &pol) : NULL;
		if (present[i]) {
			assert_non_null(sb);
			assert_string_equal(sb->name, name);
			policy_unref(pol);
			sandbox_put(sb);
			n++;
		}
		assert_int_equal(sandbox_ca_pem(T, name, &pem), present[i] ? 0 : -ENOENT);
		free(pem);
	}
	assert_int_equal(sandbox_count(T), n);
}

static void unreg_all(unsigned upto)
{
	unsigned i;

	for (i = 0; i < upto; i++)
		if (present[i])
			unreg(i);
	check_all(upto);
}

/* Sixteen blocks: auto gives .2 of each /30 in order, then the pool is
 * full; a freed block is the next one given. */
static void test_pool_allocation(void **state)
{
	char want[32], got[64];
	unsigned i;

	(void)state;
	for (i = 0; i < 16; i++) {
		assert_int_equal(reg(i, "auto"), 0);
		snprintf(want, sizeof(want), "10.77.0.%u", i * 4 + 2);
		addr_format(&addr_of[i], got, sizeof(got));
		assert_string_equal(got, want);
	}
	assert_int_equal(reg(16, "auto"), -ENOSPC);
	assert_false(present[16]);
	unreg(9);
	unreg(3);
	assert_int_equal(reg(17, "auto"), 0);
	addr_format(&addr_of[17], got, sizeof(got));
	assert_string_equal(got, "10.77.0.14"); /* block 3 */
	assert_int_equal(reg(18, "auto"), 0);
	addr_format(&addr_of[18], got, sizeof(got));
	assert_string_equal(got, "10.77.0.38"); /* block 9 */
	assert_int_equal(reg(19, "auto"), -ENOSPC);
	/* An address given by hand, inside the pool, holds its block too. */
	unreg(0);
	assert_int_equal(reg(20, "10.77.0.2"), 0);
	assert_int_equal(reg(21, "auto"), -ENOSPC);
	check_all(32);
	unreg_all(32);
}

/* Names and addresses already held are refused, and nothing changes. */
static void test_duplicates(void **state)
{
	struct sl_err err;

	(void)state;
	assert_int_equal(reg(0, "10.77.0.6"), 0);
	assert_int_equal(sandbox_register(T, "sb-0", "10.77.0.10", policy_path, true, NULL, &err),
			 -EEXIST);
	assert_int_equal(
		sandbox_register(T, "sb-other", "10.77.0.6", policy_path, true, NULL, &err),
		-EEXIST);
	assert_int_equal(sandbox_unregister(T, "sb-other", &err), -ENOENT);
	check_all(2);
	unreg_all(2);
	assert_int_equal(sandbox_unregister(T, "sb-0", &err), -ENOENT);
}

/* sandbox_reserve(): the address a create's register will get, held from
 * every other until the registration takes it or lets it go. */
static void test_reserve(void **state)
{
	struct sl_addr a, b, c;
	struct sl_err err;
	char got[64];

	(void)state;
	assert_int_equal(reg(0, "auto"), 0); /* 10.77.0.2 */
	/* A name registered already gets nothing held. */
	assert_int_equal(sandbox_reserve(T, "sb-0", &a, &err), -EEXIST);
	assert_int_equal(sandbox_reserve(T, "sb-1", &a, &err), 0);
	addr_format(&a, got, sizeof(got));
	assert_string_equal(got, "10.77.0.6");
	/* Held: "auto" passes it by, and it cannot be asked for by hand. */
	assert_int_equal(reg(2, "auto"), 0);
	addr_format(&addr_of[2], got, sizeof(got));
	assert_string_equal(got, "10.77.0.10");
	assert_int_equal(sandbox_register(T, "sb-3", "10.77.0.6", policy_path, true, NULL, &err),
			 -EEXIST);
	assert_non_null(strstr(sl_err_msg(&err), "being registered"));
	/* The registration it was held for takes it. */
	assert_int_equal(sandbox_register_ca(T, "sb-1", "10.77.0.6", policy_path, false, false,
					     NULL, true, NULL, &b, &err),
			 0);
	assert_memory_equal(&a, &b, sizeof(a));
	present[1] = true;
	addr_of[1] = b;
	check_all(4);
	/* One that fails lets it go: the next gets the same address. */
	assert_int_equal(sandbox_reserve(T, "sb-3", &a, &err), 0);
	addr_format(&a, got, sizeof(got));
	assert_string_equal(got, "10.77.0.14");
	assert_true(sandbox_register_ca(T, "sb-3", "10.77.0.14", "/nonexistent/p.yaml", false,
					false, NULL, true, NULL, &b, &err) < 0);
	assert_int_equal(sandbox_reserve(T, "sb-3", &b, &err), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	/* So does sandbox_unreserve(); never an address a sandbox holds. */
	sandbox_unreserve(T, &b);
	sandbox_unreserve(T, &addr_of[1]);
	assert_int_equal(sandbox_reserve(T, "sb-4", &c, &err), 0);
	assert_memory_equal(&a, &c, sizeof(a));
	assert_int_equal(reg(5, "auto"), 0);
	addr_format(&addr_of[5], got, sizeof(got));
	assert_string_equal(got, "10.77.0.18");
	check_all(8);
	/* A full pool holds nothing more. */
	for (unsigned i = 6; i < 17; i++)
		assert_int_equal(reg(i, "auto"), 0);
	assert_int_equal(sandbox_reserve(T, "sb-99", &a, &err), -ENOSPC);
	sandbox_unreserve(T, &c);
	assert_int_equal(sandbox_reserve(T, "sb-99", &a, &err), 0);
	assert_memory_equal(&a, &c, sizeof(a));
	sandbox_unreserve(T, &a);
	unreg_all(32);
}

/* Is slot @h among the eight around the table's wrap-around (60-63, 0-3)? */
static bool near_wrap(size_t h)
{
	return h >= SLOTS - 4 || h < 4;
}

/* 40 sandboxes whose addresses and names all hash to eight slots around
 * the wrap-around of the 64: one run of 40 entries in each table. Removing
 * from the middle of the run, in an order that changes, keeps every other
 * one findable. */
static void test_collisions(void **state)
{
	static char names[40][32];
	static struct sl_addr addrs[40];
	unsigned i, n, round, cand;
	struct sl_err err;

	(void)state;
	for (n = 0, cand = 0; n < 40 && cand < 100000; cand++) {
		struct sl_addr a;

		addr_from_v4(&a, 0x0a630000u + cand); /* 10.99.0.0 + cand */
		if (near_wrap(fnv_slot(&a, sizeof(a))))
			addrs[n++] = a;
	}
	assert_int_equal(n, 40);
	for (n = 0, cand = 0; n < 40 && cand < 100000; cand++) {
		snprintf(names[n], sizeof(names[n]), "c-%u", cand);
		if (near_wrap(fnv_slot(names[n], strlen(names[n]))))
			n++;
	}
	assert_int_equal(n, 40);
	for (round = 0; round < 6; round++) {
		for (i = 0; i < 40; i++) {
			char a[ADDR_STRLEN];

			addr_format(&addrs[i], a, sizeof(a));
			assert_int_equal(
				sandbox_register(T, names[i], a, policy_path, true, NULL, &err), 0);
		}
		assert_int_equal(sandbox_count(T), 40);
		for (i = 0; i < 40; i++) {
			unsigned k = (i * 7 + round * 3) % 40, j; /* 7 is prime to 40 */

			assert_int_equal(sandbox_unregister(T, names[k], &err), 0);
			/* Every one still there is found, by address and by name. */
			for (j = 0; j < 40; j++) {
				struct policy *pol = NULL;
				struct sandbox *sb = sandbox_lookup(T, &addrs[j], &pol);
				bool want = true;
				unsigned m;
				char *pem = NULL;

				for (m = 0; m <= i; m++)
					want = want && (m * 7 + round * 3) % 40 != j;
				if (want) {
					assert_non_null(sb);
					assert_string_equal(sb->name, names[j]);
					policy_unref(pol);
					sandbox_put(sb);
				} else {
					assert_null(sb);
				}
				assert_int_equal(sandbox_ca_pem(T, names[j], &pem),
						 want ? 0 : -ENOENT);
				free(pem);
			}
			assert_int_equal(sandbox_count(T), 39 - i);
		}
	}
}

/* A thousand sandboxes with names never seen before, never more than 30 at
 * once, in 64 slots: a table that left a mark per removal would be full
 * of them long before the end, and refuse or lose sandboxes. */
static void test_churn(void **state)
{
	unsigned i, live = 0;
	char a[32];

	(void)state;
	for (i = 0; i < 1000; i++) {
		snprintf(a, sizeof(a), "10.98.%u.%u", i / 200, i % 200 + 1);
		assert_int_equal(reg(100 + i, a), 0);
		live++;
		if (live > 30) {
			unreg(100 + i - 30);
			live--;
		}
		if (i % 97 == 0)
			check_all(1100);
	}
	check_all(1100);
	unreg_all(1100);
	assert_int_equal(sandbox_count(T), 0);
}

/* Writes @text to @dir/@file; its path in @path. */
static void write_policy(const char *file, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/* The registration's second line: the policy path a restart loads. */
static void saved_policy(const char *name, char *out, size_t len)
{
	char path[300], line[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/state/sandboxes/%s", dir, name);
	f = fopen(path, "r");
	assert_non_null(f);
	/* The policy line: "policy PATH", after its checksum when the file is
	 * checked (common/sumfile.h). */
	out[0] = '\0';
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, "policy ");

		if (p && (p == line || p[-1] == ' ')) {
			line[strcspn(line, "\n")] = '\0';
			snprintf(out, len, "%s", p + strlen("policy "));
			break;
		}
	}
	fclose(f);
	assert_true(out[0] != '\0');
}

static bool allows(const struct policy *p, const char *name)
{
	return policy_match_name(p, name, strlen(name), 443, NULL) == POLICY_ALLOW;
}

/* sandbox_update(): a broken policy or an unknown sandbox changes nothing;
 * a good one is in force at the next lookup, in the registration and in
 * the list, with the hashes of both; the synthetic map stays. */
static void test_update(void **state)
{
	struct sl_err err;
	char good[200], broken[200], saved[300], list[4096];
	struct sandbox_update_info info;
	struct policy *before, *pol;
	struct dns_synth *synth;
	struct sandbox *sb;
	char sha_before[65];
	uint32_t uid;

	(void)state;
	write_policy("b.yaml", "version: 1\negress:\n  allow:\n    - host: b.example\n", good,
		     sizeof(good));
	write_policy("broken.yaml", "version: 1\negress:\n  allow:\n    - hostz: b.example\n",
		     broken, sizeof(broken));
	assert_int_equal(reg(900, "auto"), 0);
	sb = sandbox_lookup(T, &addr_of[900], &before);
	assert_non_null(sb);
	synth = sb->synth;
	snprintf(sha_before, sizeof(sha_before), "%s", sb->policy_sha256);
	assert_int_equal(strlen(sha_before), 64);

	assert_int_equal(sandbox_update(T, "sb-901", good, false, NULL, &info, &err), -ENOENT);
	assert_string_equal(sl_err_msg(&err), "no such sandbox `sb-901`");
	assert_int_equal(sandbox_update(T, "sb-900", "rel.yaml", false, NULL, &info, &err),
			 -EINVAL);

	assert_true(sandbox_update(T, "sb-900", broken, false, NULL, &info, &err) < 0);
	assert_true(strncmp(sl_err_msg(&err), broken, strlen(broken)) == 0);
	assert_non_null(strstr(sl_err_msg(&err), ":4:7: ")); /* FILE:LINE:COL */
	assert_int_equal(sl_err_errno(&err), 0);	     /* a policy error, no system call's */
	/* A directory is refused (-EINVAL, errno 0), a missing file a failed
	 * call (its errno): each in the words the user has always read. */
	assert_int_equal(sandbox_update(T, "sb-900", "/tmp", false, NULL, &info, &err), -EINVAL);
	assert_string_equal(sl_err_msg(&err), "/tmp: not a regular file of at most 1048576 bytes");
	assert_int_equal(sl_err_errno(&err), 0);
	assert_int_equal(
		sandbox_update(T, "sb-900", "/nonexistent/p.yaml", false, NULL, &info, &err),
		-ENOENT);
	assert_string_equal(sl_err_msg(&err),
			    "/nonexistent/p.yaml: cannot open: No such file or directory");
	assert_int_equal(sl_err_errno(&err), ENOENT);
	pol = sandbox_policy(sb);
	assert_ptr_equal(pol, before);
	policy_unref(pol);
	saved_policy("sb-900", saved, sizeof(saved));
	assert_string_equal(saved, policy_path);

	assert_int_equal(sandbox_update(T, "sb-900", good, false, NULL, &info, &err), 0);
	pol = sandbox_policy(sb);
	assert_ptr_not_equal(pol, before);
	assert_true(allows(pol, "b.example"));
	assert_false(allows(pol, "example.com"));
	assert_true(allows(before, "example.com"));
	policy_unref(pol);
	assert_string_equal(info.old_path, policy_path);
	assert_string_equal(info.new_path, good);
	assert_string_equal(info.old_sha256, sha_before);
	assert_int_equal(strlen(info.new_sha256), 64);
	assert_string_not_equal(info.new_sha256, sha_before);
	assert_string_equal(sb->policy_sha256, info.new_sha256);
	assert_ptr_equal(sb->synth, synth);
	saved_policy("sb-900", saved, sizeof(saved));
	assert_string_equal(saved, good);
	assert_true(sandbox_list(T, OWNER_ANY, list, sizeof(list)) > 0);
	assert_non_null(strstr(list, good));
	/* Root's: listed for root, not for a member's uid. */
	assert_int_equal(sandbox_owner(T, "sb-900", &uid), 0);
	assert_int_equal(uid, 0);
	assert_int_equal(sandbox_owner(T, "sb-no-such", &uid), -ENOENT);
	assert_true(sandbox_list(T, 0, list, sizeof(list)) > 0);
	assert_non_null(strstr(list, "sb-900 "));
	assert_int_equal(sandbox_list(T, 12345, list, sizeof(list)), 0);

	policy_unref(before); /* the old policy lives until its last holder */
	sandbox_put(sb);
	unreg(900);
}

/* The value of VAR= in @env ("VAR=value" lines) in @out; "" when absent. */
static void env_value(const char *env, const char *var, char *out, size_t len)
{
	char key[64];
	const char *p;

	snprintf(key, sizeof(key), "%s=", var);
	out[0] = '\0';
	for (p = env; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, key, strlen(key)) == 0) {
			snprintf(out, len, "%.*s", (int)strcspn(p + strlen(key), "\n"),
				 p + strlen(key));
			return;
		}
}

/* Credentials across sandbox_update(): a credential that stays keeps its
 * placeholder, a removed one's is revoked (also in the saved state), a new
 * one gets one; one that comes back gets a new one, not the revoked. */
static void test_update_credentials(void **state)
{
	static const char cred[] = "  - name: %s\n    source: { file: %s/secret }\n"
				   "    scope: { hosts: [example.com] }\n    placeholder: %s\n";
	struct sl_err err;
	char a[200], b[200], secret[200], text[1024], env[1024];
	char keep[64], gone[64], keep2[64], gone2[64], fresh[64], name[CREDS_NAME_MAX + 1];
	struct sandbox_update_info info;
	struct policy *pol;
	struct sandbox *sb;
	int k;

	(void)state;
	write_policy("secret", "s3cret\n", secret, sizeof(secret));
	chmod(secret, 0600);
	k = snprintf(text, sizeof(text),
		     "version: 1\negress:\n  allow:\n    - host: example.com\ncredentials:\n");
	k += snprintf(text + k, sizeof(text) - (size_t)k, cred, "keep", dir, "KEEP");
	snprintf(text + k, sizeof(text) - (size_t)k, cred, "gone", dir, "GONE");
	write_policy("ca.yaml", text, a, sizeof(a));
	k = snprintf(text, sizeof(text),
		     "version: 1\negress:\n  allow:\n    - host: example.com\ncredentials:\n");
	k += snprintf(text + k, sizeof(text) - (size_t)k, cred, "keep", dir, "KEEP");
	snprintf(text + k, sizeof(text) - (size_t)k, cred, "new", dir, "NEW");
	write_policy("cb.yaml", text, b, sizeof(b));

	assert_int_equal(sandbox_register(T, "sb-910", "auto", a, true, NULL, &err), 0);
	assert_int_equal(sandbox_placeholders(T, "sb-910", env, sizeof(env), &err), 0);
	env_value(env + strlen(CTL_OK), "KEEP", keep, sizeof(keep));
	env_value(env + strlen(CTL_OK), "GONE", gone, sizeof(gone));
	assert_int_equal(strlen(keep), CREDS_PLACEHOLDER_LEN);
	assert_int_equal(strlen(gone), CREDS_PLACEHOLDER_LEN);

	assert_int_equal(sandbox_update(T, "sb-910", b, false, NULL, &info, &err), 0);
	assert_int_equal(sandbox_placeholders(T, "sb-910", env, sizeof(env), &err), 0);
	env_value(env + strlen(CTL_OK), "KEEP", keep2, sizeof(keep2));
	env_value(env + strlen(CTL_OK), "GONE", gone2, sizeof(gone2));
	env_value(env + strlen(CTL_OK), "NEW", fresh, sizeof(fresh));
	assert_string_equal(keep2, keep);
	assert_string_equal(gone2, "");
	assert_int_equal(strlen(fresh), CREDS_PLACEHOLDER_LEN);
	sb = find_name(T, "sb-910");
	assert_non_null(sb);
	assert_int_equal(creds_table_lookup(sb->creds, gone, (uint64_t)time(NULL), name),
			 CREDS_PH_REVOKED);
	assert_int_equal(creds_table_lookup(sb->creds, keep, (uint64_t)time(NULL), name),
			 CREDS_PH_VALID);

	/* Back to A: "gone" is given a new placeholder. */
	assert_int_equal(sandbox_update(T, "sb-910", a, false, NULL, &info, &err), 0);
	assert_int_equal(sandbox_placeholders(T, "sb-910", env, sizeof(env), &err), 0);
	env_value(env + strlen(CTL_OK), "GONE", gone2, sizeof(gone2));
	assert_int_equal(strlen(gone2), CREDS_PLACEHOLDER_LEN);
	assert_string_not_equal(gone2, gone);
	pol = sandbox_policy(sb);
	assert_true(allows(pol, "example.com"));
	policy_unref(pol);
	unreg(910);
}

/* Whose right a sandbox's files are read with: "reader" lines both ways,
 * root's by default, a member's refused without an opener (no identity
 * but the process's own can be had then), and an unknown one failing
 * closed. */
static void test_reader(void **state)
{
	struct file_who w, member = { .uid = 12345, .gid = 12345, .n_groups = 1, .groups = { 7 } };
	struct sandbox_update_info info;
	char path[300], line[64 * 11 + 32];
	struct sl_err err = { 0 };
	struct sumfile_writer sw;
	struct sandbox *sb;
	struct reg_file rf;
	bool rewrite;
	FILE *f;
	int i;

	(void)state;
	assert_int_equal(reader_parse("65534 100 4 5", 13, &w), 0);
	assert_int_equal(w.uid, 65534);
	assert_int_equal(w.gid, 100);
	assert_int_equal(w.n_groups, 2);
	assert_int_equal(w.groups[1], 5);
	assert_int_equal(reader_parse("0 0", 3, &w), 0);
	assert_int_equal(w.n_groups, 0);
	assert_int_equal(reader_parse("1", 1, &w), -EINVAL);
	assert_int_equal(reader_parse("1 2 x", 5, &w), -EINVAL);
	assert_int_equal(reader_parse("1 -2", 4, &w), -EINVAL);
	assert_int_equal(reader_parse("4294967295 0", 12, &w), -EINVAL); /* (uid_t)-1 */
	/* 2 + 64 numbers are whole; one group more is refused. */
	strcpy(line, "1 2");
	for (i = 0; i < 64; i++)
		strcat(line, " 3");
	assert_int_equal(reader_parse(line, strlen(line), &w), 0);
	assert_int_equal(w.n_groups, 64);
	strcat(line, " 3");
	assert_int_equal(reader_parse(line, strlen(line), &w), -EINVAL);

	/* Written and read back through the registration file. */
	snprintf(path, sizeof(path), "%s/reader-file", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	sumfile_begin(&sw, f, REG_KIND);
	sumfile_line(&sw, "address 10.77.0.2");
	sumfile_line(&sw, "policy %s", policy_path);
	reader_line(&sw, &member);
	assert_int_equal(sumfile_commit(&sw, path, path), 0);
	assert_int_equal(reg_read("x", path, &rf, &rewrite), 0);
	assert_true(rf.has_reader);
	assert_false(rf.damaged);
	assert_int_equal(rf.reader.uid, 12345);
	assert_int_equal(rf.reader.n_groups, 1);
	assert_int_equal(rf.reader.groups[0], 7);
	assert_ptr_equal(restore_reader("x", &rf), &rf.reader);
	unlink(path);
	/* Without one: root's when whole (from before readers were kept),
	 * nobody's when the file lost lines. */
	memset(&rf, 0, sizeof(rf));
	assert_null(restore_reader("x", &rf));
	rf.damaged = true;
	assert_int_equal(restore_reader("x", &rf)->uid, 65534);

	/* A root registration says so; a member's update is refused here,
	 * where no opener can take the member's identity, and changes
	 * nothing. */
	assert_int_equal(reg(920, "auto"), 0);
	sb = sandbox_get(T, "sb-920");
	assert_non_null(sb);
	assert_null(sb->reader);
	sandbox_put(sb);
	snprintf(path, sizeof(path), "%s/state/sandboxes/sb-920", dir);
	assert_int_equal(reg_read("sb-920", path, &rf, &rewrite), 0);
	assert_true(rf.has_reader);
	assert_int_equal(rf.reader.uid, 0);
	assert_int_equal(sandbox_update(T, "sb-920", policy_path, false, &member, &info, &err),
			 -EACCES);
	assert_non_null(strstr(sl_err_msg(&err), "Permission denied"));
	assert_int_equal(reg_read("sb-920", path, &rf, &rewrite), 0);
	assert_int_equal(rf.reader.uid, 0);
	/* Groups that could not all be had: refused before any read. */
	w = member;
	w.n_groups = FILE_WHO_GROUPS_MAX + 1;
	assert_int_equal(sandbox_update(T, "sb-920", policy_path, false, &w, &info, &err), -EINVAL);
	assert_non_null(strstr(sl_err_msg(&err), "could not be read, or are more than 64"));
	/* uid 0 is root, whatever its groups say. */
	w.uid = 0;
	assert_int_equal(sandbox_update(T, "sb-920", policy_path, false, &w, &info, &err), 0);
	unreg(920);
	assert_true(sandbox_register_ca(T, "sb-921", "auto", policy_path, false, false, NULL, false,
					&member, NULL, &err) < 0);
	sb = sandbox_get(T, "sb-921");
	assert_null(sb);
}

/* A name ending in .tmp is another's temporary: refused. One with .tmp
 * inside is a name like any other, and restored after a restart; a
 * temporary a crash left is skipped. */
static void test_tmp_names(void **state)
{
	struct sl_err err = { 0 };
	char path[300];
	struct sandbox *sb;
	FILE *f;

	(void)state;
	assert_int_equal(sandbox_register(T, "x.tmp", "auto", policy_path, true, NULL, &err),
			 -EINVAL);
	assert_non_null(strstr(sl_err_msg(&err), "not ending in .tmp"));
	assert_int_equal(sandbox_register(T, "a.tmpx", "auto", policy_path, true, NULL, &err), 0);
	snprintf(path, sizeof(path), "%s/state/sandboxes/b.tmp", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("half a registration", f);
	fclose(f);
	/* A restart: a new table on the same state_dir. */
	sandbox_table_free(T);
	T = NULL;
	assert_int_equal(sandbox_table_new(&cfg, &T), 0);
	assert_int_equal(sandbox_restore(T, &err), 1);
	sb = sandbox_get(T, "a.tmpx");
	assert_non_null(sb);
	sandbox_put(sb);
	assert_int_equal(sandbox_unregister(T, "a.tmpx", &err), 0);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool_allocation),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_reserve),
		cmocka_unit_test(test_collisions),
		cmocka_unit_test(test_churn),
		cmocka_unit_test(test_update),
		cmocka_unit_test(test_update_credentials),
		cmocka_unit_test(test_reader),
		cmocka_unit_test(test_tmp_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
