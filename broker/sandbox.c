// SPDX-License-Identifier: MIT
/* The table of registered sandboxes: who a source address is, and with
 * which policy.
 *
 * Theory of operation: the control thread registers, unregisters and
 * reloads; workers look sandboxes up per accepted connection. Lookups take
 * the read lock, find the entry by source address in a hash table, and take
 * references on the sandbox and its policy, so a reload or an unregister
 * never frees what a connection still uses. A second table finds a sandbox
 * by name, for the control requests, and a bitmap of the pool's blocks
 * gives a new sandbox its address: no request walks every sandbox, so
 * registering and unregistering take the same time with one sandbox or
 * thousands, and hold the write lock (which stalls every lookup) for as
 * short. Both tables are open addressing with linear probing, and a
 * removal moves the entries after it back into place rather than leaving
 * a tombstone, so that they do not slow down as sandboxes come and go.
 * Registrations are written to state_dir/sandboxes/NAME (address, policy
 * path, approvals; never a secret) and restored at start-up. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/sha.h>

#include "common/ctlproto.h"
#include "broker/broker_internal.h"
#include "broker/audit.h"
#include "broker/tls/tls.h"
#include "broker/creds/creds.h"
#include "common/err.h"
#include "common/file.h"
#include "common/sumfile.h"
#include "common/text.h"
#include "common/log.h"
#include "common/ytree.h"
#include "policy/policy.h"

#define REG_KIND "registration"
/* A registration: a few lines, and up to POLICY_EXTRA_MAX approvals of
 * about 300 bytes each. */
#define REG_MAX_BYTES (64 * 1024)

/* tests/unit/test_sandbox_table.c builds this file with a small table, so
 * that its entries collide and removals move runs of them. */
#ifndef SANDBOX_HASH_SLOTS
#define SANDBOX_HASH_SLOTS (SANDBOX_MAX * 2)
#endif
#define HASH_SLOTS SANDBOX_HASH_SLOTS
/* Blocks of the pool the bitmap tracks: at most SANDBOX_MAX are taken at
 * once, so the first free one is always among the first SANDBOX_MAX + 1. */
#define POOL_BITS_MAX ((uint32_t)SANDBOX_MAX + 1)
/* Entries of the list of all sandboxes: the hash tables hold no more. */
#define ALL_MAX (SANDBOX_MAX < HASH_SLOTS ? SANDBOX_MAX : HASH_SLOTS)

struct sandbox_table {
	pthread_rwlock_t lock;
	struct sandbox **slot;	  /* by address; NULL empty */
	struct sandbox **by_name; /* the same sandboxes, by name */
	/* The same sandboxes again, in @all[0, @n), each at its all_ix: what
	 * goes through all of them costs their number, not the hash tables'
	 * size (2 x SANDBOX_MAX slots, 1 MiB each). */
	struct sandbox **all;
	size_t n;
	char dir[300];
	struct sl_addr pool; /* sandbox_pool */
	unsigned pool_plen;
	uint64_t *used;	  /* bit b: the pool's /30 number b is a sandbox's */
	uint32_t nblocks; /* bits in @used */
	char synth_dir[300];
	char ca_dir[300];	  /* state_dir/ca/NAME/{ca.key,ca.crt} */
	struct sl_addr synth_net; /* synthetic_pool */
	unsigned synth_plen;
	size_t timed_approvals; /* approvals with an end, all sandboxes */
	/* The broker's workers, told of policies swapped and sandboxes gone
	 * (none in unit tests). */
	struct worker *workers;
	unsigned n_workers;
};

/* FNV-1a over @len bytes, as a slot number. Keys come from the control
 * socket (root only), so a keyed hash buys nothing here. */
static size_t fnv_slot(const void *p, size_t len)
{
	const unsigned char *b = p;
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return (size_t)(h % HASH_SLOTS);
}

static size_t addr_home(const struct sandbox *s)
{
	return fnv_slot(&s->addr, sizeof(s->addr));
}

static size_t name_home(const struct sandbox *s)
{
	return fnv_slot(s->name, strlen(s->name));
}

/*
 * Empties slot @i of @t, a table whose entries sit at @home or after it
 * (linear probing): every entry of the run after @i that may move back to
 * the hole does, so that a look-up still finds it before an empty slot.
 * Caller holds the write lock.
 */
static void slot_remove(struct sandbox **t, size_t i, size_t (*home)(const struct sandbox *))
{
	size_t j = i, k;

	for (;;) {
		j = (j + 1) % HASH_SLOTS;
		if (!t[j])
			break;
		k = home(t[j]);
		/* t[j] stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t[i] = t[j];
		i = j;
	}
	t[i] = NULL;
}

/* The pool block of @a when it is a sandbox address (.2 of a /30 of the
 * pool) that the bitmap tracks; -1 otherwise. */
static int64_t pool_block(const struct sandbox_table *tab, const struct sl_addr *a)
{
	uint32_t off;

	if (!addr_is_v4(a) || !addr_in_prefix(a, &tab->pool, tab->pool_plen))
		return -1;
	off = addr_v4(a) - addr_v4(&tab->pool);
	if (off % 4 != 2 || off / 4 >= tab->nblocks)
		return -1;
	return off / 4;
}

static void block_mark(struct sandbox_table *tab, const struct sl_addr *a, bool used)
{
	int64_t b = pool_block(tab, a);

	if (b < 0)
		return;
	if (used)
		tab->used[b / 64] |= 1ull << (b % 64);
	else
		tab->used[b / 64] &= ~(1ull << (b % 64));
}

static void ca_gone_sweep(struct sandbox_table *tab);

void sandbox_table_set_workers(struct sandbox_table *tab, struct worker *workers, unsigned n)
{
	tab->workers = workers;
	tab->n_workers = n;
}

void sandbox_table_free(struct sandbox_table *tab)
{
	size_t i;

	if (!tab)
		return;
	for (i = 0; tab->all && i < tab->n; i++)
		sandbox_put(tab->all[i]);
	free(tab->all);
	free(tab->slot);
	free(tab->by_name);
	free(tab->used);
	pthread_rwlock_destroy(&tab->lock);
	free(tab);
}

static int table_init(struct sandbox_table *tab, const struct broker_config *cfg);

int sandbox_table_new(const struct broker_config *cfg, struct sandbox_table **out)
{
	struct sandbox_table *tab = calloc(1, sizeof(*tab));
	int r;

	*out = NULL;
	if (!tab)
		return -ENOMEM;
	r = -pthread_rwlock_init(&tab->lock, NULL);
	if (r < 0) {
		free(tab);
		return r;
	}
	r = table_init(tab, cfg);
	if (r < 0) {
		sandbox_table_free(tab);
		return r;
	}
	*out = tab;
	return 0;
}

static int table_init(struct sandbox_table *tab, const struct broker_config *cfg)
{
	unsigned host_bits = 128 - cfg->pool_plen;

	tab->slot = calloc(HASH_SLOTS, sizeof(*tab->slot));
	tab->by_name = calloc(HASH_SLOTS, sizeof(*tab->by_name));
	tab->all = calloc(ALL_MAX, sizeof(*tab->all));
	/* A /30 per sandbox: 2^(host bits - 2) blocks, at most POOL_BITS_MAX
	 * tracked (2^16 < POOL_BITS_MAX < 2^17). */
	tab->nblocks = host_bits < 2	     ? 0
		       : host_bits - 2 >= 17 ? POOL_BITS_MAX
					     : (uint32_t)1 << (host_bits - 2);
	tab->used = calloc((tab->nblocks + 63) / 64 + 1, sizeof(*tab->used));
	if (!tab->slot || !tab->by_name || !tab->all || !tab->used)
		return -ENOMEM;
	snprintf(tab->dir, sizeof(tab->dir), "%s/sandboxes", cfg->state_dir);
	tab->pool = cfg->pool_net;
	tab->pool_plen = cfg->pool_plen;
	tab->synth_net = cfg->synthetic_net;
	tab->synth_plen = cfg->synthetic_plen;
	if (mkdir(cfg->state_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (mkdir(tab->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(tab->synth_dir, sizeof(tab->synth_dir), "%s/synthetic", cfg->state_dir);
	if (mkdir(tab->synth_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	snprintf(tab->ca_dir, sizeof(tab->ca_dir), "%s/ca", cfg->state_dir);
	if (mkdir(tab->ca_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	ca_gone_sweep(tab);
	if (creds_init(cfg) < 0)
		return -errno;
	return 0;
}

/*
 * policy_load_file(), with @sb's approvals (if any, when not NULL) appended
 * to the rules, and the SHA-256 of the bytes it compiled in @sha256 (hex):
 * read once, so that the hash is that of the policy in force even when the
 * file changes meanwhile. Same messages as policy_load_file().
 */
static int load_policy_extra(const char *path, const struct sandbox *sb, struct policy **out,
			     char sha256[65], struct policy_error *perr)
{
	struct policy_extra_host extra[POLICY_EXTRA_MAX];
	size_t n_extra = 0;
	unsigned char md[SHA256_DIGEST_LENGTH];
	struct sl_err fe = { 0 };
	char *buf;
	size_t len, i;
	int r;

	*out = NULL;
	memset(perr, 0, sizeof(*perr));
	/* A refusal of the file (not regular, too big: errno 0) is -EINVAL
	 * to the caller, a call's failure its errno. */
	r = file_read_all_err(path, YTREE_MAX_BYTES, &buf, &len, &fe);
	if (r < 0) {
		snprintf(perr->msg, sizeof(perr->msg), "%s", sl_err_msg(&fe));
		return sl_err_errno(&fe) ? r : -EINVAL;
	}
	for (i = 0; sb && i < sb->n_approvals && i < POLICY_EXTRA_MAX; i++) {
		extra[n_extra].host = sb->approvals[i].host;
		extra[n_extra++].port = sb->approvals[i].port;
	}
	r = policy_load_buffer_extra(path, buf, len, extra, n_extra, out, perr);
	if (r == 0) {
		SHA256((const unsigned char *)buf, len, md);
		for (i = 0; i < sizeof(md); i++)
			snprintf(sha256 + 2 * i, 3, "%02x", md[i]);
	}
	free(buf);
	return r;
}

/*
 * The reader a sandbox keeps for @who: NULL for root (and for no caller),
 * else a copy in *@out. -EINVAL (@err says why) when the caller's groups
 * could not all be had: read with fewer, a file that a group of the caller
 * is refused (mode 0604, say) would be given.
 */
static int reader_new(const struct file_who *who, struct file_who **out, struct sl_err *err)
{
	*out = NULL;
	if (!who || who->uid == 0)
		return 0;
	if (who->n_groups > FILE_WHO_GROUPS_MAX)
		return sl_err_set(
			err, 0,
			"uid %u: its supplementary groups could not be read, or are more "
			"than %d: the broker reads the files of a sandbox a control_group "
			"member registers with that member's groups",
			(unsigned)who->uid, FILE_WHO_GROUPS_MAX);
	*out = malloc(sizeof(**out));
	if (!*out)
		return sl_err_set(err, ENOMEM, "out of memory");
	**out = *who;
	return 0;
}

/* The policy at @path (with @sb's approvals, when not NULL) and its
 * credentials' secrets, read with @reader's right (NULL: root's), into
 * *@out with its file's SHA-256; @err says why not. */
static int compile_as(const struct file_who *reader, const char *path, const struct sandbox *sb,
		      struct policy **out, char sha256[65], struct sl_err *err)
{
	const struct file_who *was = file_read_as(reader);
	struct policy_error perr;
	int r;

	r = load_policy_extra(path, sb, out, sha256, &perr);
	if (r < 0) {
		policy_error_to_err(&perr, r, err);
	} else {
		r = creds_load_secrets(*out, err);
		if (r < 0) {
			policy_unref(*out);
			*out = NULL;
		}
	}
	file_read_as(was);
	return r;
}

/* A new sandbox's name: text_name_ok(), and not another's temporary. */
static bool name_ok(const char *s)
{
	return text_name_ok(s, strlen(s), SANDBOX_NAME_MAX) && !text_tmp_name(s);
}

/* Slot of @a, or of the free place for it when @for_insert (then
 * -EEXIST when it is there already). -1 when there is none. */
static ssize_t find_slot(struct sandbox_table *tab, const struct sl_addr *a, bool for_insert)
{
	size_t i = fnv_slot(a, sizeof(*a)), k;

	for (k = 0; k < HASH_SLOTS; k++, i = (i + 1) % HASH_SLOTS) {
		struct sandbox *s = tab->slot[i];

		if (!s)
			return for_insert ? (ssize_t)i : -1;
		if (memcmp(&s->addr, a, sizeof(*a)) == 0)
			return for_insert ? -EEXIST : (ssize_t)i;
	}
	return -1;
}

/* The same in the table by name. */
static ssize_t name_slot(struct sandbox_table *tab, const char *name, bool for_insert)
{
	size_t i = fnv_slot(name, strlen(name)), k;

	for (k = 0; k < HASH_SLOTS; k++, i = (i + 1) % HASH_SLOTS) {
		struct sandbox *s = tab->by_name[i];

		if (!s)
			return for_insert ? (ssize_t)i : -1;
		if (strcmp(s->name, name) == 0)
			return for_insert ? -EEXIST : (ssize_t)i;
	}
	return -1;
}

static struct sandbox *find_name(struct sandbox_table *tab, const char *name)
{
	ssize_t i = name_slot(tab, name, false);

	return i < 0 ? NULL : tab->by_name[i];
}

struct sandbox *sandbox_lookup(struct sandbox_table *tab, const struct sl_addr *src,
			       struct policy **pol)
{
	struct sandbox *sb = NULL;
	ssize_t i;

	pthread_rwlock_rdlock(&tab->lock);
	i = find_slot(tab, src, false);
	if (i >= 0) {
		sb = tab->slot[i];
		atomic_fetch_add(&sb->refs, 1);
		*pol = policy_ref(sb->policy);
	}
	pthread_rwlock_unlock(&tab->lock);
	return sb;
}

struct policy *sandbox_policy(struct sandbox *sb)
{
	struct policy *p;

	pthread_rwlock_rdlock(&sb->table->lock);
	p = policy_ref(sb->policy);
	pthread_rwlock_unlock(&sb->table->lock);
	return p;
}

void sandbox_put(struct sandbox *sb)
{
	if (sb && atomic_fetch_sub(&sb->refs, 1) == 1) {
		policy_unref(sb->policy);
		dns_synth_free(sb->synth);
		creds_table_free(sb->creds);
		tls_ca_free(sb->ca);
		proxy_hold_table_free(atomic_load(&sb->holds));
		free(sb->approvals);
		free(sb->reader);
		pthread_mutex_destroy(&sb->dns.lock);
		free(sb);
	}
}

/*
 * Writes state_dir/sandboxes/NAME through NAME.tmp: written, flushed,
 * closed and renamed, each step checked, so that a registration that
 * reports success is in the file system whole (a full disk fails the
 * write or the close: ext4 and tmpfs reserve the space when written). Not
 * synced: the file has to outlive the broker, not the machine (the
 * sandbox's namespace and links do not outlive it either), and an fsync
 * would hold the table's write lock, and so every new connection's
 * lookup, for a disk flush.
 */
/* "reader UID GID GROUP...": whose right the sandbox's files are read
 * with ("reader 0 0": root's). Always written, so that a registration
 * without one is from before (root's, as then) or lost it (see
 * sandbox_restore()). */
static void reader_line(struct sumfile_writer *w, const struct file_who *r)
{
	char groups[FILE_WHO_GROUPS_MAX * 11 + 1] = "";
	size_t k = 0;
	uint32_t i;

	for (i = 0; r && i < r->n_groups && i < FILE_WHO_GROUPS_MAX; i++)
		k += (size_t)snprintf(groups + k, sizeof(groups) - k, " %u",
				      (unsigned)r->groups[i]);
	sumfile_line(w, "reader %u %u%s", r ? (unsigned)r->uid : 0u, r ? (unsigned)r->gid : 0u,
		     groups);
}

static int persist(struct sandbox_table *tab, const struct sandbox *sb)
{
	char path[600], tmp[620];
	struct sumfile_writer w;
	FILE *f;
	char a[ADDR_STRLEN];

	snprintf(path, sizeof(path), "%s/%s", tab->dir, sb->name);
	f = file_create_tmp(path, 0600, tmp, sizeof(tmp));
	if (!f)
		return -errno;
	addr_format(&sb->addr, a, sizeof(a));
	/* Checked lines (common/sumfile.h), each saying what it is, so that
	 * a damaged one costs only itself. */
	sumfile_begin(&w, f, REG_KIND);
	sumfile_line(&w, "address %s", a);
	sumfile_line(&w, "policy %s", sb->policy_path);
	reader_line(&w, sb->reader);
	if (sb->netns)
		sumfile_line(&w, "%s", CTL_REGISTER_NETNS);
	if (sb->audit)
		sumfile_line(&w, "mode %s", CTL_REGISTER_AUDIT);
	/* `sluice approve`s, so that a restart keeps them as it keeps an
	 * update's policy path: each with its end on the wall clock. */
	for (size_t i = 0; i < sb->n_approvals; i++)
		sumfile_line(&w, "approve %s %u %llu", sb->approvals[i].host, sb->approvals[i].port,
			     (unsigned long long)sb->approvals[i].until_wall_ms);
	return sumfile_commit(&w, tmp, path);
}

/* A registration as read back. */
struct reg_file {
	char addr[64], pol[300];
	struct file_who reader;
	bool has_reader; /* a "reader" line */
	bool damaged;	 /* lines lost, or not ours */
	bool netns;
	bool audit;    /* "mode audit": registered in audit mode */
	unsigned seen; /* 1 address, 2 policy */
	unsigned bad;  /* lines that verified but are not ours */
	/* "approve HOST PORT UNTIL_WALL_MS" lines; until_ms is not set. */
	struct sandbox_approval approvals[POLICY_EXTRA_MAX];
	size_t n_approvals;
};

/* An "approve HOST PORT UNTIL_WALL_MS" line (without "approve "), into
 * @a. Return: 0, or -EINVAL when it is not one. */
static int approval_parse(const char *s, size_t len, struct sandbox_approval *a)
{
	char line[sizeof(a->host) + 48], *host, *port, *until, *end, *save = NULL;
	const char *why = NULL;
	unsigned long long p, u;

	if (len >= sizeof(line))
		return -EINVAL;
	memcpy(line, s, len);
	line[len] = '\0';
	host = strtok_r(line, " ", &save);
	port = strtok_r(NULL, " ", &save);
	until = strtok_r(NULL, " ", &save);
	if (!host || !port || !until || strtok_r(NULL, " ", &save) ||
	    strlen(host) >= sizeof(a->host) || !policy_check_name(host, strlen(host), false, &why))
		return -EINVAL;
	errno = 0;
	p = strtoull(port, &end, 10);
	if (errno || *end || p > 65535)
		return -EINVAL;
	u = strtoull(until, &end, 10);
	if (errno || *end)
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	snprintf(a->host, sizeof(a->host), "%s", host);
	a->port = (uint16_t)p;
	a->until_wall_ms = u;
	return 0;
}

/* A "reader" line's "UID GID GROUP..." into @w. 0, or -EINVAL. */
static int reader_parse(const char *s, size_t len, struct file_who *w)
{
	char line[FILE_WHO_GROUPS_MAX * 11 + 32], *t, *save = NULL;
	unsigned v[FILE_WHO_GROUPS_MAX + 2];
	unsigned n = 0;

	if (len >= sizeof(line))
		return -EINVAL;
	memcpy(line, s, len);
	line[len] = '\0';
	for (t = strtok_r(line, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		if (n == FILE_WHO_GROUPS_MAX + 2 || !text_uint(t, &v[n]) || v[n] == UINT_MAX)
			return -EINVAL;
		n++;
	}
	if (n < 2)
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->uid = v[0];
	w->gid = v[1];
	w->n_groups = n - 2;
	memcpy(w->groups, v + 2, (n - 2) * sizeof(v[0]));
	return 0;
}

static int reg_line(const char *s, size_t len, bool ok, void *arg)
{
	struct reg_file *rf = arg;

	if (!ok)
		return 0;
	if (len > 8 && !memcmp(s, "approve ", 8)) {
		if (rf->n_approvals < POLICY_EXTRA_MAX &&
		    approval_parse(s + 8, len - 8, &rf->approvals[rf->n_approvals]) == 0)
			rf->n_approvals++;
		else
			rf->bad++;
	} else if (len > 7 && !memcmp(s, "reader ", 7)) {
		if (reader_parse(s + 7, len - 7, &rf->reader) == 0)
			rf->has_reader = true;
		else
			rf->bad++;
	} else if (len > 8 && !memcmp(s, "address ", 8) && len - 8 < sizeof(rf->addr)) {
		memcpy(rf->addr, s + 8, len - 8);
		rf->addr[len - 8] = '\0';
		rf->seen |= 1;
	} else if (len > 7 && !memcmp(s, "policy ", 7) && len - 7 < sizeof(rf->pol)) {
		memcpy(rf->pol, s + 7, len - 7);
		rf->pol[len - 7] = '\0';
		rf->seen |= 2;
	} else if (len == strlen(CTL_REGISTER_NETNS) && !memcmp(s, CTL_REGISTER_NETNS, len)) {
		rf->netns = true;
	} else if (len == 5 + strlen(CTL_REGISTER_AUDIT) && !memcmp(s, "mode ", 5) &&
		   !memcmp(s + 5, CTL_REGISTER_AUDIT, len - 5)) {
		rf->audit = true;
	} else {
		rf->bad++;
	}
	return 0;
}

/* The registration of sluice 0.x: address, policy path, optional mark. */
static void reg_legacy(struct reg_file *rf, char *buf)
{
	char *l[3] = { NULL, NULL, NULL }, *p = buf;
	int i;

	for (i = 0; i < 3; i++)
		l[i] = strsep(&p, "\n"); /* NULL once @p runs out */
	if (l[0] && l[1] && l[0][0] && l[1][0] && strlen(l[0]) < sizeof(rf->addr) &&
	    strlen(l[1]) < sizeof(rf->pol)) {
		snprintf(rf->addr, sizeof(rf->addr), "%s", l[0]);
		snprintf(rf->pol, sizeof(rf->pol), "%s", l[1]);
		rf->seen = 3;
	}
	rf->netns = l[2] && !strcmp(l[2], CTL_REGISTER_NETNS);
}

/*
 * Reads registration @path into @rf. Return: 0 when it can be restored
 * (whole, from before checksums, or damaged with its address and policy
 * lines intact: then logged), -EBADMSG when it cannot (logged and
 * audited), another negative errno when it cannot be read.
 */
static int reg_read(const char *name, const char *path, struct reg_file *rf, bool *rewrite)
{
	struct sumfile_result res;
	char *buf;
	size_t len;
	int r;

	memset(rf, 0, sizeof(*rf));
	*rewrite = false;
	r = file_read_all(path, REG_MAX_BYTES, &buf, &len);
	if (r < 0)
		return r;
	sumfile_parse(buf, len, REG_KIND, false, reg_line, rf, &res);
	if (res.status == SUMFILE_LEGACY) {
		reg_legacy(rf, buf);
		*rewrite = rf->seen == 3;
		if (*rewrite)
			log_info("sandbox: registration %s is in the format from before "
				 "checksums: read once, rewritten in the checked format",
				 path);
	}
	free(buf);
	rf->damaged = res.status != SUMFILE_LEGACY && (res.status != SUMFILE_OK || rf->bad);
	if (res.status == SUMFILE_OK && rf->seen == 3 && !rf->bad)
		return 0;
	if (res.status == SUMFILE_LEGACY && rf->seen == 3)
		return 0;
	if (rf->seen == 3) {
		log_err("sandbox: registration %s is damaged (%u lines lost%s): its address %s and "
			"policy %s verify and are kept%s; rewritten",
			path, res.lost + rf->bad, res.end_missing ? ", and its end" : "", rf->addr,
			rf->pol,
			rf->netns ? ""
				  : " (whether `sluice create` made it is lost: it is "
				    "not dropped when its namespace goes)");
		sandbox_state_audit(name, path, "damaged");
		*rewrite = true;
		return 0;
	}
	log_err("sandbox: registration %s is %s: %s lost: `%s` is not restored and reaches "
		"nothing; the file is left for you (delete and re-create the sandbox)",
		path, sumfile_status_name(res.status),
		!rf->seen	  ? "its address and policy are"
		: !(rf->seen & 1) ? "its address is"
				  : "its policy is",
		name);
	sandbox_state_audit(name, path, "damaged");
	return -EBADMSG;
}

/* Notes in *@r and @what the first failure (@rc < 0, errno other than
 * ENOENT) of a removal of @path. */
static void note_rm(int rc, const char *path, int *r, char *what, size_t whatlen)
{
	if (rc < 0 && errno != ENOENT && *r == 0) {
		*r = -errno;
		snprintf(what, whatlen, "%s", path);
	}
}

/* A CA directory that remove_state() moved aside, by its name in
 * state_dir/ca; the broker removes those left by a crash at start-up. */
#define CA_GONE_PREFIX ".gone."
/* At most this many are removed at start-up. */
#define CA_GONE_SWEEP_MAX 4096

/* What a CA directory may hold, with the temporaries a crash mid-write
 * leaves. */
static const char *const ca_files[] = { "ca.key",     "ca.crt",	    "ca.sum",
					"ca.key.tmp", "ca.crt.tmp", "ca.sum.tmp" };

/* Empties and removes the CA directory @path moved aside. 0 or -errno. */
static int ca_dir_remove(const char *path)
{
	char f[PATH_MAX];
	size_t i;
	int r;

	for (i = 0; i < sizeof(ca_files) / sizeof(ca_files[0]); i++) {
		if (snprintf(f, sizeof(f), "%s/%s", path, ca_files[i]) >= (int)sizeof(f))
			return -ENAMETOOLONG;
		r = file_unlink(f);
		if (r < 0 && r != -ENOENT)
			return r;
	}
	r = file_rmdir(path);
	return r == -ENOENT ? 0 : r;
}

/* Removes the CA directory moved aside as @path and, with @drop, the CA's
 * key in the key process, by @id. */
static void ca_gone_finish(const char *path, bool drop, const unsigned char id[32])
{
	int r = ca_dir_remove(path);

	if (r < 0)
		log_warn("sandbox: cannot remove %s: %s", path, strerror(-r));
	if (drop && tls_ca_delete_id(id) < 0)
		log_warn("sandbox: the key process did not delete the CA key of %s", path);
}

/* What remove_state() leaves to a thread: ca_gone_finish()'s arguments. */
struct ca_gone {
	char *path;
	bool drop;
	unsigned char id[32];
};

static void *ca_gone_main(void *arg)
{
	struct ca_gone *g = arg;

	ca_gone_finish(g->path, g->drop, g->id);
	free(g->path);
	free(g);
	return NULL;
}

/*
 * Removes the CA directory moved aside as @path (and with @drop the CA's
 * key in the key process, by @id) on a thread of its own, or here when none
 * can be started. An unlink or an rmdir can take milliseconds (a file
 * system that frees and discards the blocks there and then: ext4 mounted
 * with -o discard), so can the key process's answer, and unregister runs
 * on the control thread, partly under the table's write lock, which stalls
 * every lookup meanwhile; the caller of `sluice delete` waits for it too.
 */
static void ca_gone_later(const char *path, bool drop, const unsigned char id[32])
{
	struct ca_gone *g = calloc(1, sizeof(*g));
	pthread_attr_t attr;
	pthread_t t;
	int r;

	if (!g || !(g->path = strdup(path))) {
		free(g);
		ca_gone_finish(path, drop, id);
		return;
	}
	g->drop = drop;
	if (drop)
		memcpy(g->id, id, sizeof(g->id));
	r = pthread_attr_init(&attr);
	if (r == 0) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 64 << 10);
		r = pthread_create(&t, &attr, ca_gone_main, g);
		pthread_attr_destroy(&attr);
	}
	if (r != 0)
		ca_gone_main(g);
}

/* At start-up: the CA directories a broker that died left moved aside. */
static void ca_gone_sweep(struct sandbox_table *tab)
{
	char path[PATH_MAX];
	struct dirent *de;
	unsigned n = 0;
	DIR *d = opendir(tab->ca_dir);

	if (!d)
		return;
	while (n < CA_GONE_SWEEP_MAX && (de = readdir(d))) {
		if (strncmp(de->d_name, CA_GONE_PREFIX, sizeof(CA_GONE_PREFIX) - 1))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", tab->ca_dir, de->d_name) <
		    (int)sizeof(path))
			(void)ca_dir_remove(path);
		n++;
	}
	closedir(d);
}

/* Removes the files of sandbox @name from state_dir: its registration, its
 * synthetic names and its CA. The CA's directory is renamed out of the way
 * (the name is free for a new registration at once), and emptied and
 * removed by ca_gone_later(); with @drop, the CA's key in the key process
 * (broker/keys/) is deleted there too, once all the rest went (a restart
 * restores the sandbox while its state is there). Return: 0, or the first
 * error other than ENOENT (@what names its path). */
static int remove_state(struct sandbox_table *tab, const char *name, const struct tls_ca *drop,
			char *what, size_t whatlen)
{
	static unsigned gone;
	unsigned char id[32];
	char gone_path[760];
	char path[700];
	int r = 0;
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", tab->dir, name);
	note_rm(file_unlink(path), path, &r, what, whatlen);
	snprintf(path, sizeof(path), "%s/%s.names", tab->synth_dir, name);
	note_rm(file_unlink(path), path, &r, what, whatlen);
	snprintf(path, sizeof(path), "%s/%s.names.hwm", tab->synth_dir, name);
	note_rm(file_unlink(path), path, &r, what, whatlen);
	snprintf(path, sizeof(path), "%s/%s", tab->ca_dir, name);
	snprintf(gone_path, sizeof(gone_path), "%s/" CA_GONE_PREFIX "%u", tab->ca_dir, gone++);
	if (rename(path, gone_path) == 0) {
		ca_gone_later(gone_path, r == 0 && tls_ca_key_id(drop, id), id);
		return r;
	}
	if (errno != ENOENT) {
		/* Not moved: emptied and removed here, as far as it goes. */
		for (i = 0; i < sizeof(ca_files) / sizeof(ca_files[0]); i++) {
			snprintf(path, sizeof(path), "%s/%s/%s", tab->ca_dir, name, ca_files[i]);
			note_rm(unlink(path), path, &r, what, whatlen);
		}
		snprintf(path, sizeof(path), "%s/%s", tab->ca_dir, name);
		note_rm(rmdir(path), path, &r, what, whatlen);
	}
	if (r == 0 && tls_ca_key_id(drop, id) && tls_ca_delete_id(id) < 0)
		log_warn("sandbox: `%s`: the key process did not delete its CA key", name);
	return r;
}

/* Takes sandbox @name out of the table and returns it (the table's
 * reference passes to the caller), or NULL. Caller holds the write lock. */
static struct sandbox *table_take(struct sandbox_table *tab, const char *name)
{
	struct sandbox *sb;
	ssize_t ni, ai;

	ni = name_slot(tab, name, false);
	if (ni < 0)
		return NULL;
	sb = tab->by_name[ni];
	ai = find_slot(tab, &sb->addr, false);
	slot_remove(tab->by_name, (size_t)ni, name_home);
	if (ai >= 0)
		slot_remove(tab->slot, (size_t)ai, addr_home);
	block_mark(tab, &sb->addr, false);
	/* The last of the list takes its place. */
	tab->n--;
	tab->all[sb->all_ix] = tab->all[tab->n];
	tab->all[sb->all_ix]->all_ix = sb->all_ix;
	tab->all[tab->n] = NULL;
	return sb;
}

/*
 * Picks the first free /30 of sandbox_pool: .1 is the gateway (broker side),
 * .2 the sandbox. Under the write lock, so concurrent creates never collide.
 * The bitmap is 64 blocks a word: with a thousand sandboxes, 16 words.
 */
static int allocate(struct sandbox_table *tab, struct sl_addr *out)
{
	uint32_t w, blk;

	for (w = 0; (uint64_t)w * 64 < tab->nblocks; w++) {
		if (tab->used[w] == ~0ull)
			continue;
		blk = w * 64 + (uint32_t)__builtin_ctzll(~tab->used[w]);
		if (blk >= tab->nblocks)
			break;
		*out = tab->pool;
		addr_from_v4(out, addr_v4(&tab->pool) + blk * 4 + 2);
		return 0;
	}
	return -ENOSPC;
}

/* Is @a's /30 held by a sandbox_reserve() that is not registered yet? */
static bool block_reserved(struct sandbox_table *tab, const struct sl_addr *a)
{
	int64_t b = pool_block(tab, a);

	return b >= 0 && (tab->used[b / 64] & (1ull << (b % 64))) && find_slot(tab, a, false) < 0;
}

int sandbox_reserve(struct sandbox_table *tab, const char *name, struct sl_addr *out,
		    struct sl_err *err)
{
	int r = 0;

	pthread_rwlock_wrlock(&tab->lock);
	if (name_slot(tab, name, false) >= 0) {
		r = -EEXIST;
		sl_err_set(err, 0, "sandbox `%s` exists", name);
	} else if (allocate(tab, out) < 0) {
		r = -ENOSPC;
		sl_err_set(err, 0, "sandbox_pool is full");
	} else {
		block_mark(tab, out, true);
	}
	pthread_rwlock_unlock(&tab->lock);
	return r;
}

void sandbox_unreserve(struct sandbox_table *tab, const struct sl_addr *a)
{
	pthread_rwlock_wrlock(&tab->lock);
	if (block_reserved(tab, a))
		block_mark(tab, a, false);
	pthread_rwlock_unlock(&tab->lock);
}

/* Says what the checksums of a restored sandbox's CA said (@k from
 * tls_ca_check_sums()), when the CA itself loaded. */
static void ca_sums_report(const char *name, const char *dir, int k, const char *what)
{
	if (k == -ENOENT) {
		log_info("sandbox: `%s`: its CA in %s has no checksums (written before them): "
			 "read once, checksums written",
			 name, dir);
		if (tls_ca_write_sums(dir) < 0)
			log_warn("sandbox: `%s`: cannot write %s/ca.sum", name, dir);
	} else if (k == -EBADMSG) {
		log_warn("sandbox: `%s`: %s/ca.sum is damaged; its CA passes every other check "
			 "(key and certificate match): kept, checksums written again",
			 name, dir);
		sandbox_state_audit(name, dir, "damaged");
		if (tls_ca_write_sums(dir) < 0)
			log_warn("sandbox: `%s`: cannot write %s/ca.sum", name, dir);
	} else if (k < 0) {
		/* Kept, not replaced: a new CA fails every intercepted host
		 * for sure; this one may still serve. Said at every start. */
		log_err("sandbox: `%s`: its CA's %s in %s does not match its checksum, but its "
			"key and certificate still match: kept; if intercepted hosts fail, "
			"re-create the sandbox",
			name, what, dir);
		sandbox_state_audit(name, dir, "damaged");
	}
}

/* The sandbox's CA: a new one for a new sandbox (saved once registered),
 * the saved one for a restored sandbox. */
static int sandbox_ca(struct sandbox_table *tab, struct sandbox *sb, bool fresh, struct sl_err *err)
{
	char dir[600];

	if (!fresh) {
		struct sl_err e = { 0 };
		char what[64];
		int k;

		snprintf(dir, sizeof(dir), "%s/%s", tab->ca_dir, sb->name);
		k = tls_ca_check_sums(dir, what, sizeof(what));
		sb->ca = tls_ca_load(dir, &e);
		if (sb->ca) {
			ca_sums_report(sb->name, dir, k, what);
			return 0;
		}
		/* Fail closed all the same: the sandbox's bundle does not hold
		 * a new CA, so its clients refuse every intercepted connection
		 * until the sandbox is made again; other hosts keep working. */
		log_err("sandbox: `%s`: cannot load its CA (%s%s%s): a new one is made; "
			"intercepted hosts fail for it until it is re-created",
			sb->name, sl_err_msg(&e), k == -EILSEQ ? "; checksum mismatch: " : "",
			k == -EILSEQ ? what : "");
		sandbox_state_audit(sb->name, dir, "damaged");
		sb->ca = tls_ca_create(sb->name, err);
		if (sb->ca && (((k = file_mkdir(dir, 0700)) < 0 && k != -EEXIST) ||
			       tls_ca_save(sb->ca, dir) < 0))
			log_err("sandbox: `%s`: cannot save its CA in %s", sb->name, dir);
	} else {
		sb->ca = tls_ca_create(sb->name, err);
	}
	if (!sb->ca) {
		sl_err_wrap(err, "sandbox CA");
		return -EIO;
	}
	return 0;
}

int sandbox_ca_pem(struct sandbox_table *tab, const char *name, char **pem)
{
	struct sandbox *sb;
	int r = -ENOENT;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	if (sb)
		r = tls_ca_cert_pem(sb->ca, pem);
	pthread_rwlock_unlock(&tab->lock);
	return r;
}

/* Takes @reg, registered a moment ago and not wired yet, out of the
 * table again and removes what it wrote to state_dir. */
static void undo_register(struct sandbox_table *tab, struct sandbox *reg)
{
	char what[700];
	struct sandbox *sb;
	int r;

	pthread_rwlock_wrlock(&tab->lock);
	sb = table_take(tab, reg->name);
	dns_synth_journal_end(reg->synth); /* before its file goes */
	r = remove_state(tab, reg->name, NULL, what, sizeof(what));
	pthread_rwlock_unlock(&tab->lock);
	if (r < 0)
		log_err("sandbox: `%s`: cannot remove %s: %s", reg->name, what, strerror(-r));
	if (!sb)
		return;
	atomic_store(&sb->dead, true);
	(void)tls_ca_delete(sb->ca); /* a key the key process saved for it */
	if (sb->creds)
		creds_sandbox_forget(sb);
	sandbox_put(sb);
}

/* An audit line (proto "state", reason `state-damaged`) for a state file
 * of sandbox @name found @what ("damaged", "missing") at start-up: whoever
 * reads only the audit log learns why the sandbox behaves differently. */
void sandbox_state_audit(const char *name, const char *path, const char *what)
{
	struct audit_event ev = {
		.sandbox = name,
		.proto = "state",
		.name = path,
		.decision = "error",
		.reason = "state-damaged",
		.rule = what,
	};

	audit_log(&ev);
}

/* Says what a restart's replay of @sb's synthetic-names journal found,
 * when it was not a clean one: never silent about lost names. */
static void synth_replay_report(struct sandbox *sb, const char *path,
				const struct dns_synth_replay *rep)
{
	if (rep->missing) {
		log_err("sandbox: `%s`: its synthetic-names journal %s is missing: the names it "
			"had lost their addresses (a client that cached one fails until it asks "
			"again); new names start at offset %u (%s)",
			sb->name, path, rep->next,
			rep->next > 1 ? "above the mark kept beside it"
				      : "its mark is lost too: an address a lost name had may be "
					"given again; re-create the sandbox to be sure");
		sandbox_state_audit(sb->name, path, "missing");
		sb->names_lost = true;
	} else if (rep->damaged) {
		log_err("sandbox: `%s`: synthetic-names journal %s is damaged: kept %u names at "
			"their addresses, lost %u lines; addresses of lost names are never given "
			"to another name (new names start at offset %u); rewritten",
			sb->name, path, rep->kept, rep->lost, rep->next);
		sandbox_state_audit(sb->name, path, "damaged");
		sb->names_lost = true;
	} else if (rep->hwm_damaged) {
		log_warn("sandbox: `%s`: %s.hwm is damaged: the journal's own mark is used; "
			 "rewritten",
			 sb->name, path);
	} else if (rep->legacy) {
		log_info("sandbox: `%s`: %s is in the format from before checksums (%u names, "
			 "%u bad lines): read once, rewritten in the checked format",
			 sb->name, path, rep->kept, rep->lost);
	}
}

/* sandbox_register(), with the CA in *@ca when not NULL: taken (*@ca set
 * to NULL) once the sandbox needs it, else left to the caller. */
static int do_register(struct sandbox_table *tab, const char *name, const char *addr,
		       const char *policy_path, bool save, bool netns, bool audit, bool reserved,
		       const struct file_who *who, struct tls_ca **ca, struct sl_addr *assigned,
		       struct sl_err *err)
{
	char astr[ADDR_STRLEN];
	struct dns_synth *synth;
	struct sandbox *reg = NULL;
	struct sl_addr got;
	struct sandbox *sb;
	bool automatic = strcmp(addr, "auto") == 0;
	ssize_t slot = -1, nslot = -1;
	struct sl_err local = { 0 };
	int r;

	if (!err)
		err = &local; /* logged below */
	if (!name_ok(name)) {
		sl_err_set(err, 0,
			   "bad sandbox name `%s` (1-%d of A-Z a-z 0-9 . _ -, not starting with . "
			   "or -, not ending in .tmp)",
			   name, SANDBOX_NAME_MAX);
		return -EINVAL;
	}
	if (policy_path[0] != '/' || strlen(policy_path) >= sizeof(sb->policy_path)) {
		sl_err_set(err, 0, "policy path `%s` must be absolute", policy_path);
		return -EINVAL;
	}
	sb = calloc(1, sizeof(*sb));
	if (!sb)
		return -ENOMEM;
	atomic_init(&sb->refs, 1);
	sb->table = tab;
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	snprintf(sb->policy_path, sizeof(sb->policy_path), "%s", policy_path);
	sb->netns = netns;
	sb->audit = audit;
	if (!automatic && addr_parse(addr, &sb->addr) < 0) {
		sl_err_set(err, 0, "bad address `%s`", addr);
		free(sb);
		return -EINVAL;
	}
	r = reader_new(who, &sb->reader, err);
	if (r == 0)
		r = compile_as(sb->reader, policy_path, NULL, &sb->policy, sb->policy_sha256, err);
	if (r < 0) {
		free(sb->reader);
		free(sb);
		return r;
	}
	if (*ca) {
		sb->ca = *ca;
		*ca = NULL;
		r = 0;
	} else {
		r = sandbox_ca(tab, sb, save, err);
	}
	if (r < 0) {
		policy_unref(sb->policy);
		free(sb->reader);
		free(sb);
		return r;
	}
	/* Empty until the sandbox's first DNS query: costs a few bytes. */
	sb->synth = dns_synth_new(&tab->synth_net, tab->synth_plen, DNS_SYNTH_MAX_NAMES);
	if (!sb->synth) {
		r = -errno;
		sl_err_sys(err, r, "cannot create the synthetic address map");
		policy_unref(sb->policy);
		tls_ca_free(sb->ca);
		free(sb->reader);
		free(sb);
		return r;
	}
	pthread_mutex_init(&sb->dns.lock, NULL);
	synth = sb->synth;
	pthread_rwlock_wrlock(&tab->lock);
	r = automatic ? allocate(tab, &sb->addr) : 0;
	if (r < 0) {
		sl_err_set(err, 0, "sandbox_pool is full");
	} else if ((nslot = name_slot(tab, name, true)) == -EEXIST) {
		r = -EEXIST;
		sl_err_set(err, 0, "sandbox `%s` exists", name);
	} else if (!reserved && block_reserved(tab, &sb->addr)) {
		r = -EEXIST;
		sl_err_set(err, 0, "address `%s` is being registered", addr);
	} else if (nslot < 0 || (slot = find_slot(tab, &sb->addr, true)) < 0 || tab->n >= ALL_MAX) {
		r = slot == -EEXIST ? -EEXIST : -ENOSPC;
		if (r == -EEXIST)
			sl_err_set(err, 0, "address `%s` is registered already", addr);
		else
			sl_err_set(err, 0, "too many sandboxes (at most %d)", (int)ALL_MAX);
	} else {
		r = save ? persist(tab, sb) : 0;
		if (r < 0) {
			sl_err_sys(err, r, "cannot write registration in %s", tab->dir);
		} else {
			tab->slot[slot] = sb;
			tab->by_name[nslot] = sb;
			block_mark(tab, &sb->addr, true);
			sb->all_ix = tab->n;
			tab->all[tab->n++] = sb;
			got = sb->addr;
			reg = sb;
			sb = NULL;
		}
	}
	pthread_rwlock_unlock(&tab->lock);
	if (sb) {
		policy_unref(sb->policy);
		dns_synth_free(sb->synth);
		tls_ca_free(sb->ca);
		pthread_mutex_destroy(&sb->dns.lock);
		free(sb->reader);
		free(sb);
		return r;
	}
	if (save) {
		/* The CA's key in state_dir (0600), so that a restart keeps the
		 * sandbox's trust bundle valid. Without it, interception after a
		 * restart would fail closed (a new CA the sandbox does not
		 * trust): a create whose CA is not saved fails, below. */
		char dir[600];

		snprintf(dir, sizeof(dir), "%s/%s", tab->ca_dir, name);
		r = file_mkdir(dir, 0700);
		r = r < 0 && r != -EEXIST ? r : tls_ca_save(reg->ca, dir);
		if (r < 0)
			sl_err_sys(err, r, "cannot save the sandbox's CA in %s", dir);
	}
	if (r == 0) {
		/* Synthetic addresses outlive a broker restart: the names are
		 * journalled in state_dir and replayed when it restores. Done
		 * before the sandbox's first query can arrive: a new sandbox is
		 * not wired yet, a restored one waits for the workers. */
		struct dns_synth_replay rep;
		char jpath[600];

		snprintf(jpath, sizeof(jpath), "%s/%s.names", tab->synth_dir, name);
		r = dns_synth_journal(synth, jpath, !save, &rep);
		if (r < 0 && save)
			sl_err_sys(err, r, "cannot journal synthetic names in %s", jpath);
		if (r < 0 && !save) {
			/* New names start above the mark kept beside the
			 * journal, when that was read. */
			log_err("sandbox: `%s`: cannot replay or journal synthetic names in %s: %s; "
				"kept %u names at their addresses, new names start at offset %u and "
				"are not journalled (a restart loses them)",
				name, jpath, strerror(-r), rep.kept, rep.next ? rep.next : 1);
			sandbox_state_audit(name, jpath, "unreadable");
			reg->names_lost = true;
		} else if (!save) {
			synth_replay_report(reg, jpath, &rep);
		}
		if (!save)
			r = 0;
	}
	/* Placeholders: new ones for a new sandbox, the saved ones after a
	 * restart. The control thread is the only writer of the table, so
	 * @reg stays registered meanwhile. */
	if (r == 0) {
		r = creds_sandbox_init(reg, reg->policy, !save);
		if (r < 0 && save)
			sl_err_sys(err, r, "cannot issue or save its placeholders");
		else if (r < 0)
			log_err("sandbox: `%s`: cannot issue placeholders: %s", name, strerror(-r));
		if (!save)
			r = 0;
	}
	if (r < 0) {
		/* A new sandbox whose state is not on disk would come back from
		 * a restart with a new CA and new placeholders, which its
		 * clients do not know: it is refused, and nothing of it stays.
		 * It is not wired yet, so no connection holds it. */
		undo_register(tab, reg);
		log_err("sandbox: `%s`: not registered: %s", name, sl_err_msg(err));
		return r;
	}
	if (assigned)
		*assigned = got;
	addr_format(&got, astr, sizeof(astr));
	log_info("sandbox: registered `%s` at %s with %s%s", name, astr, policy_path,
		 sandbox_audit(reg, reg->policy) ? " (audit mode)" : "");
	return 0;
}

int sandbox_register(struct sandbox_table *tab, const char *name, const char *addr,
		     const char *policy_path, bool save, struct sl_addr *assigned,
		     struct sl_err *err)
{
	struct tls_ca *ca = NULL;

	return do_register(tab, name, addr, policy_path, save, false, false, false, NULL, &ca,
			   assigned, err);
}

int sandbox_register_ca(struct sandbox_table *tab, const char *name, const char *addr,
			const char *policy_path, bool netns, bool audit, struct tls_ca *ca,
			bool reserved, const struct file_who *who, struct sl_addr *assigned,
			struct sl_err *err)
{
	int r = do_register(tab, name, addr, policy_path, true, netns, audit, reserved, who, &ca,
			    assigned, err);
	struct sl_addr a;

	tls_ca_free(ca); /* not taken: refused before the sandbox needed it */
	if (r < 0 && reserved && addr_parse(addr, &a) == 0)
		sandbox_unreserve(tab, &a);
	return r;
}

int sandbox_unregister(struct sandbox_table *tab, const char *name, struct sl_err *err)
{
	struct sandbox *sb = NULL;
	struct sl_err local = { 0 };
	char what[700];
	bool netns;
	unsigned i;
	int r = 0;

	if (!err)
		err = &local; /* logged below */
	pthread_rwlock_wrlock(&tab->lock);
	sb = table_take(tab, name);
	if (sb) {
		/* No DNS answer appends to its journal once that is removed
		 * (its file may become another one's: file_unlink()). */
		dns_synth_journal_end(sb->synth);
		r = remove_state(tab, name, sb->ca, what, sizeof(what));
	}
	pthread_rwlock_unlock(&tab->lock);
	if (!sb) {
		sl_err_set(err, 0, "no such sandbox `%s`", name);
		return -ENOENT;
	}
	netns = sb->netns;
	for (i = 0; i < sb->n_approvals; i++)
		if (sb->approvals[i].until_ms)
			tab->timed_approvals--; /* they go with it */
	atomic_store(&sb->dead, true);
	/* Its CA key, where the key process keeps it, went with remove_state()
	 * (kept while the rest of its state is: a restart restores the
	 * sandbox then). */
	creds_sandbox_forget(sb); /* its placeholders are worthless from now */
	/* Every worker closes the sandbox's open flows; each holds a reference
	 * until it has. A put in the loop drops only the reference just taken,
	 * and ours, dropped last, keeps @sb alive until then: the analyzer
	 * does not count references, hence the NOLINTs. */
	for (i = 0; i < tab->n_workers; i++) {
		struct worker *w = &tab->workers[i];

		atomic_fetch_add(&sb->refs, 1);
		// NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
		if (loop_post(w->loop, proxy_close_sandbox_post, sb) < 0)
			sandbox_put(sb);
	}
	sandbox_put(sb); // NOLINT(clang-analyzer-unix.Malloc)
	if (r < 0) {
		/* Forgotten here all the same: the caller has cut its wire.
		 * Its state stays on disk; sandbox_restore() drops it at the
		 * next start if its namespace is gone, else restores it. */
		sl_err_set(err, r, "unregistered `%s`, but cannot remove %s: %s; %s", name, what,
			   strerror(-r),
			   netns ? "the broker's next start drops it once its namespace is gone"
				 : "the broker's next start restores it unless it is removed");
		log_err("sandbox: %s", sl_err_msg(err));
		return r;
	}
	log_info("sandbox: unregistered `%s`", name);
	return 0;
}

int sandbox_list(struct sandbox_table *tab, uint32_t only, char *buf, size_t len)
{
	size_t i, o = 0;
	int k;

	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < tab->n && o < len; i++) {
		struct sandbox *s = tab->all[i];
		char a[ADDR_STRLEN];

		if (!sandbox_of(s, only))
			continue;
		addr_format(&s->addr, a, sizeof(a));
		/* The fifth word says what state a restart lost ("ok" when
		 * none): a client that reads four words ignores it. */
		/* The sixth, the mode: likewise new. */
		k = snprintf(buf + o, len - o, "%s %s %s %u %s %s\n", s->name, a, s->policy_path,
			     atomic_load(&s->conns),
			     s->placeholders_lost && s->names_lost ? "placeholders-lost,names-lost"
			     : s->placeholders_lost		   ? "placeholders-lost"
			     : s->names_lost			   ? "names-lost"
								   : "ok",
			     sandbox_audit(s, s->policy) ? "audit" : "enforce");
		if (k < 0 || (size_t)k >= len - o) {
			o = len;
			break;
		}
		o += (size_t)k;
	}
	pthread_rwlock_unlock(&tab->lock);
	return o >= len ? -ENOSPC : (int)o;
}

bool sandbox_audit(const struct sandbox *sb, const struct policy *p)
{
	return sb->audit || (p && policy_mode(p) == POLICY_MODE_AUDIT);
}

size_t sandbox_audit_count(struct sandbox_table *tab)
{
	size_t i, n = 0;

	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < tab->n; i++)
		if (sandbox_audit(tab->all[i], tab->all[i]->policy))
			n++;
	pthread_rwlock_unlock(&tab->lock);
	return n;
}

/* Calls @fn for every registered sandbox, under the table's read lock (so
 * @fn must not call into the table, nor block). */
void sandbox_each(struct sandbox_table *tab, void (*fn)(const struct sandbox *sb, void *arg),
		  void *arg)
{
	size_t i;

	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < tab->n; i++)
		fn(tab->all[i], arg);
	pthread_rwlock_unlock(&tab->lock);
}

size_t sandbox_state_lost_count(struct sandbox_table *tab)
{
	size_t i, n = 0;

	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < tab->n; i++)
		if (tab->all[i]->placeholders_lost || tab->all[i]->names_lost)
			n++;
	pthread_rwlock_unlock(&tab->lock);
	return n;
}

size_t sandbox_count(struct sandbox_table *tab)
{
	size_t n;

	pthread_rwlock_rdlock(&tab->lock);
	n = tab->n;
	pthread_rwlock_unlock(&tab->lock);
	return n;
}

void sandbox_tls_stats(struct sandbox_table *tab, struct tls_leaf_stats *sum)
{
	size_t i;

	memset(sum, 0, sizeof(*sum));
	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < tab->n; i++) {
		struct sandbox *sb = tab->all[i];
		struct tls_leaf_stats st;

		if (!sb->ca)
			continue;
		tls_leaf_stats(sb->ca, &st);
		sum->hits += st.hits;
		sum->misses += st.misses;
		sum->evictions += st.evictions;
		sum->entries += st.entries;
	}
	pthread_rwlock_unlock(&tab->lock);
}

/*
 * Loads every sandbox's policy anew; swaps them in only if all load, so a
 * broken file leaves every old policy in place.
 */
int sandbox_reload_all(struct sandbox_table *tab, struct sl_err *err)
{
	struct policy **fresh;
	char(*sha)[65];
	size_t i, n;
	int r = 0;

	/* The control thread is the only writer, so the set of sandboxes, and
	 * their places in tab->all, cannot change until this returns; the
	 * read lock keeps workers going. */
	n = tab->n;
	fresh = calloc(n + 1, sizeof(*fresh));
	sha = calloc(n + 1, sizeof(*sha));
	if (!fresh || !sha) {
		free(fresh);
		free(sha);
		return sl_err_set(err, ENOMEM,
				  "out of memory for the sandboxes' policies; nothing changed");
	}
	pthread_rwlock_rdlock(&tab->lock);
	for (i = 0; i < n && r == 0; i++) {
		struct sandbox *s = tab->all[i];

		r = compile_as(s->reader, s->policy_path, s, &fresh[i], sha[i], err);
		if (r < 0) {
			/* Which sandbox: one file may serve several, and a
			 * secret's error names only the secret. */
			size_t k = strlen(err->msg);

			snprintf(err->msg + k, sizeof(err->msg) - k, " (sandbox `%s`)", s->name);
		}
	}
	pthread_rwlock_unlock(&tab->lock);
	if (r == 0) {
		pthread_rwlock_wrlock(&tab->lock);
		for (i = 0; i < n; i++) {
			struct sandbox *s = tab->all[i];
			struct policy *old;

			if (!fresh[i])
				continue;
			old = s->policy;
			s->policy = fresh[i];
			memcpy(s->policy_sha256, sha[i], sizeof(s->policy_sha256));
			fresh[i] = old; /* unref'd below, outside the lock */
		}
		pthread_rwlock_unlock(&tab->lock);
		/* New credentials get placeholders; dropped ones read as revoked. */
		for (i = 0; i < n; i++) {
			struct sandbox *s = tab->all[i];

			if (s->creds)
				creds_sandbox_sync(s, s->policy, false);
		}
		/* Open connections meet the new policies too: each worker closes
		 * the tunnels they withdrew (requests re-read it one by one). */
		for (i = 0; i < tab->n_workers; i++)
			loop_post(tab->workers[i].loop, proxy_policy_changed_post,
				  &tab->workers[i]);
	}
	for (i = 0; i < n; i++)
		policy_unref(fresh[i]);
	free(fresh);
	free(sha);
	return r;
}

/*
 * `sluice update`: one sandbox's policy swapped for another file's, all or
 * nothing. The new policy is compiled and its secrets read before anything
 * changes; then, under the write lock, the registration is rewritten with
 * the new path (a restart keeps the new policy; if it cannot be written,
 * nothing changed) and the policy pointer swapped, so that every lookup
 * after it (new connections, DNS queries, each request of an open
 * connection) meets the new policy. The synthetic address map is the
 * sandbox's, not the policy's: a name that stays allowed keeps its
 * address. Placeholders of credentials that stay are kept, those of
 * removed ones revoked, new ones issued; then each worker closes the open
 * connections the new policy withdrew, unless @keep_open.
 */
int sandbox_update(struct sandbox_table *tab, const char *name, const char *policy_path,
		   bool keep_open, const struct file_who *who, struct sandbox_update_info *info,
		   struct sl_err *err)
{
	struct file_who *reader = NULL, *old_reader;
	struct policy *fresh = NULL, *old;
	char sha[65], old_path[sizeof(((struct sandbox *)0)->policy_path)];
	struct sandbox *sb;
	unsigned i;
	int r;

	memset(info, 0, sizeof(*info));
	if (policy_path[0] != '/' || strlen(policy_path) >= sizeof(old_path)) {
		sl_err_set(err, 0, "policy path `%s` must be absolute, at most %zu bytes",
			   policy_path, sizeof(old_path) - 1);
		return -EINVAL;
	}
	/* The control thread is the only writer of the table: a sandbox found
	 * here stays registered until this function returns. */
	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	pthread_rwlock_unlock(&tab->lock);
	if (!sb) {
		sl_err_set(err, 0, "no such sandbox `%s`", name);
		return -ENOENT;
	}
	/* Read with the caller's right, who is its reader from now on: the
	 * path is the caller's choice. */
	r = reader_new(who, &reader, err);
	if (r == 0)
		r = compile_as(reader, policy_path, sb, &fresh, sha, err);
	if (r < 0) {
		free(reader);
		return r;
	}
	pthread_rwlock_wrlock(&tab->lock);
	snprintf(old_path, sizeof(old_path), "%s", sb->policy_path);
	snprintf(sb->policy_path, sizeof(sb->policy_path), "%s", policy_path);
	old_reader = sb->reader;
	sb->reader = reader;
	r = persist(tab, sb);
	if (r < 0) {
		snprintf(sb->policy_path, sizeof(sb->policy_path), "%s", old_path);
		sb->reader = old_reader;
		free(reader);
		pthread_rwlock_unlock(&tab->lock);
		sl_err_set(err, r, "cannot write registration in %s: %s; the old policy stays",
			   tab->dir, strerror(-r));
		policy_unref(fresh);
		return r;
	}
	snprintf(info->old_path, sizeof(info->old_path), "%s", old_path);
	snprintf(info->old_sha256, sizeof(info->old_sha256), "%s", sb->policy_sha256);
	old = sb->policy;
	sb->policy = fresh;
	memcpy(sb->policy_sha256, sha, sizeof(sb->policy_sha256));
	pthread_rwlock_unlock(&tab->lock);
	free(old_reader);
	snprintf(info->new_path, sizeof(info->new_path), "%s", policy_path);
	snprintf(info->new_sha256, sizeof(info->new_sha256), "%s", sha);

	/* Until these two are done, a removed credential's placeholder reads
	 * as revoked already (the policy has no such credential), and a new
	 * credential has no placeholder anyone could use. A failure here
	 * leaves the new policy in place (it is in force) and says so. */
	r = creds_sandbox_revoke_dropped(sb, fresh);
	if (r == 0)
		r = creds_sandbox_sync(sb, fresh, false);
	if (r < 0)
		log_err("sandbox: `%s`: updated, but cannot save its placeholders: %s", name,
			strerror(-r));
	for (i = 0; i < tab->n_workers; i++)
		loop_post(tab->workers[i].loop,
			  keep_open ? proxy_policy_changed_keep_post : proxy_policy_changed_post,
			  &tab->workers[i]);
	policy_unref(old);
	log_info("sandbox: `%s`: policy %s (sha256 %.12s) replaced by %s (sha256 %.12s)%s", name,
		 info->old_path, info->old_sha256, info->new_path, info->new_sha256,
		 keep_open ? ", open connections kept" : "");
	return 0;
}

/* Whether the namespace `sluice create` made for sandbox @name is gone. The
 * broker sees /run/netns as the CLI does (the same mount, or one that
 * shares its files); anything but "no such file" keeps the registration,
 * and so does a /run/netns the broker cannot see at all (a broker in a
 * mount namespace without it must not drop every sandbox). */
static bool netns_gone(const char *name)
{
	char path[300];

	if (access("/run/netns", F_OK) < 0)
		return false;
	snprintf(path, sizeof(path), "/run/netns/%s", name);
	return access(path, F_OK) < 0 && errno == ENOENT;
}

/* A registration left by a delete that could not remove it (a read-only
 * state_dir, say), whose sandbox is gone: its state goes, and the log says
 * what went. */
static void drop_stale(struct sandbox_table *tab, const char *name, const char *addr)
{
	char what[700];
	int r;

	/* Its CA key first, named by the certificate about to go. */
	snprintf(what, sizeof(what), "%s/%s", tab->ca_dir, name);
	(void)tls_ca_delete_saved(what);
	r = remove_state(tab, name, NULL, what, sizeof(what));
	creds_sandbox_remove_state(name);
	if (r < 0)
		log_err("sandbox: `%s` at %s has no namespace (/run/netns/%s is gone), but "
			"cannot remove %s: %s; it stays unregistered",
			name, addr, name, what, strerror(-r));
	else
		log_warn("sandbox: `%s` at %s has no namespace (/run/netns/%s is gone): dropped "
			 "its registration %s/%s, its CA, synthetic names and placeholders",
			 name, addr, name, tab->dir, name);
}

/* Writes the registration of @name again (in the current format). */
static void rewrite_registration(struct sandbox_table *tab, const char *name)
{
	struct sandbox *sb;
	int r = -ENOENT;

	pthread_rwlock_wrlock(&tab->lock);
	sb = find_name(tab, name);
	if (sb)
		r = persist(tab, sb);
	pthread_rwlock_unlock(&tab->lock);
	if (r < 0)
		log_err("sandbox: `%s`: cannot rewrite its registration in %s: %s", name, tab->dir,
			strerror(-r));
}

static uint64_t clock_ms_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int recompile(struct sandbox_table *tab, struct sandbox *sb, struct sl_err *err);

/*
 * The approvals a registration kept, back on its restored sandbox @name:
 * each with what is left of its time on the wall clock; one whose end
 * passed while the broker was down is not restored (and the registration
 * is rewritten without it). If the policy cannot be compiled with them,
 * the sandbox keeps its file's policy alone (fail closed) and the log says
 * so.
 */
static void restore_approvals(struct sandbox_table *tab, const char *name,
			      const struct reg_file *rf)
{
	uint64_t wall = clock_ms_of(CLOCK_REALTIME), mono = clock_ms_of(CLOCK_MONOTONIC);
	size_t i, k = 0, timed = 0, ended = 0;
	struct sl_err err = { 0 };
	struct sandbox *sb;
	int r;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	pthread_rwlock_unlock(&tab->lock);
	if (!sb)
		return;
	sb->approvals = calloc(POLICY_EXTRA_MAX, sizeof(*sb->approvals));
	if (!sb->approvals) {
		log_err("sandbox: `%s`: out of memory: its %zu approvals are not restored", name,
			rf->n_approvals);
		return;
	}
	for (i = 0; i < rf->n_approvals; i++) {
		const struct sandbox_approval *a = &rf->approvals[i];

		if (a->until_wall_ms && a->until_wall_ms <= wall) {
			log_info("sandbox: `%s`: approval of %s:%u ended while the broker was "
				 "down: not restored",
				 name, a->host, a->port);
			ended++;
			continue;
		}
		sb->approvals[k] = *a;
		if (a->until_wall_ms) {
			sb->approvals[k].until_ms = mono + (a->until_wall_ms - wall);
			timed++;
		}
		k++;
	}
	sb->n_approvals = k;
	r = k ? recompile(tab, sb, &err) : 0;
	if (r < 0) {
		log_err("sandbox: `%s`: its policy cannot be compiled with its %zu approvals (%s): "
			"they are not restored",
			name, k, sl_err_msg(&err));
		sb->n_approvals = 0;
		timed = 0;
	}
	tab->timed_approvals += timed;
	if ((ended || r < 0) && persist(tab, sb) < 0)
		log_err("sandbox: `%s`: cannot rewrite its registration in %s without the "
			"approvals not restored",
			name, tab->dir);
	if (sb->n_approvals)
		log_info("sandbox: `%s`: restored %zu approvals (%zu for a while)", name,
			 sb->n_approvals, timed);
}

/*
 * Whose right a restored sandbox's files are read with: its "reader" line's
 * user; root's for a whole registration without one (written before
 * readers were kept, when every sandbox's files were read so). A damaged
 * registration without one may have lost it: then, failing closed, the
 * files are read as nobody (65534), and a policy or secret that only its
 * registrant could read leaves the sandbox unrestored, as logged.
 */
static const struct file_who *restore_reader(const char *name, struct reg_file *rf)
{
	if (rf->has_reader)
		return &rf->reader;
	if (!rf->damaged)
		return NULL;
	memset(&rf->reader, 0, sizeof(rf->reader));
	rf->reader.uid = 65534;
	rf->reader.gid = 65534;
	log_err("sandbox: registration of `%s` is damaged and says nobody whose right its files "
		"are read with: they are read as uid 65534 until `sluice update` names the policy "
		"again",
		name);
	return &rf->reader;
}

int sandbox_restore(struct sandbox_table *tab, struct sl_err *err)
{
	DIR *d = opendir(tab->dir);
	struct dirent *de;
	struct tls_ca *ca = NULL;
	int n = 0, bad = 0, dropped = 0;

	if (!d) {
		return sl_err_sys(err, errno, "cannot read %s", tab->dir);
	}
	while ((de = readdir(d))) {
		struct sl_err e = { 0 };
		char path[600];
		struct reg_file rf;
		bool rewrite;
		int r;

		/* Spares, and a temporary a crash left (a name that only has
		 * ".tmp" inside is a sandbox's). */
		if (de->d_name[0] == '.' || text_tmp_name(de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", tab->dir, de->d_name);
		r = reg_read(de->d_name, path, &rf, &rewrite);
		if (r < 0) {
			if (r != -EBADMSG) {
				log_err("sandbox: unreadable registration %s: %s: skipped", path,
					strerror(-r));
				sandbox_state_audit(de->d_name, path, "unreadable");
			}
			bad++;
			continue;
		}
		if (rf.netns && netns_gone(de->d_name)) {
			drop_stale(tab, de->d_name, rf.addr);
			dropped++;
			continue;
		}
		if (do_register(tab, de->d_name, rf.addr, rf.pol, false, rf.netns, rf.audit, false,
				restore_reader(de->d_name, &rf), &ca, NULL, &e) < 0) {
			/* Fail closed: the sandbox stays unregistered and reaches
			 * nothing; its file stays for the operator to fix. */
			log_err("sandbox: cannot restore `%s`: %s", de->d_name, sl_err_msg(&e));
			bad++;
			continue;
		}
		if (rewrite)
			rewrite_registration(tab, de->d_name);
		if (rf.n_approvals)
			restore_approvals(tab, de->d_name, &rf);
		n++;
	}
	closedir(d);
	log_info("sandbox: restored %d registrations (%d failed, %d dropped: namespace gone)", n,
		 bad, dropped);
	/* Every CA that a registration names is loaded now: a key the key
	 * process holds no CA for belongs to no sandbox (deleted while the key
	 * process was gone, or never registered: a crash between the CA's
	 * making and its saving). Not while a registration could not be
	 * restored: its CA's key stays until it is fixed or removed. */
	if (bad == 0) {
		int k = tls_ca_sweep();

		if (k < 0)
			log_warn("sandbox: cannot sweep the CA keys no sandbox has: %s",
				 strerror(-k));
		else if (k > 0)
			log_info("sandbox: deleted %d CA keys no sandbox has", k);
	} else {
		log_info("sandbox: CA keys kept: %d registrations could not be restored", bad);
	}
	return n;
}

int sandbox_placeholders(struct sandbox_table *tab, const char *name, char *out, size_t len,
			 struct sl_err *err)
{
	struct sandbox *sb;
	int k, r = -ENOENT;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	if (sb) {
		k = snprintf(out, len, CTL_OK);
		r = creds_env(sb, sb->policy, out + k, len - (size_t)k);
	}
	pthread_rwlock_unlock(&tab->lock);
	if (r == -ENOENT)
		sl_err_set(err, 0, "no such sandbox `%s`", name);
	else if (r < 0)
		sl_err_set(err, 0, "too many placeholders");
	return r < 0 ? r : 0;
}

uint32_t sandbox_uid(const struct sandbox *sb)
{
	return sb->reader ? sb->reader->uid : 0;
}

bool sandbox_of(const struct sandbox *sb, uint32_t only)
{
	return only == OWNER_ANY || sandbox_uid(sb) == only;
}

int sandbox_owner(struct sandbox_table *tab, const char *name, uint32_t *uid)
{
	struct sandbox *sb;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	if (sb)
		*uid = sandbox_uid(sb);
	pthread_rwlock_unlock(&tab->lock);
	return sb ? 0 : -ENOENT;
}

struct sandbox *sandbox_get(struct sandbox_table *tab, const char *name)
{
	struct sandbox *sb;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	if (sb)
		atomic_fetch_add(&sb->refs, 1);
	pthread_rwlock_unlock(&tab->lock);
	return sb;
}

/*
 * Compiles @sb's policy file anew with its approvals and swaps it in, as
 * sandbox_update() does with the same file: on the control thread, which
 * alone changes the table, so @sb stays registered meanwhile. Each worker
 * then closes what the new policy withdrew (an approval that ended).
 */
static int recompile(struct sandbox_table *tab, struct sandbox *sb, struct sl_err *err)
{
	struct policy *fresh = NULL, *old;
	char sha[65];
	unsigned i;
	int r;

	r = compile_as(sb->reader, sb->policy_path, sb, &fresh, sha, err);
	if (r < 0)
		return r;
	pthread_rwlock_wrlock(&tab->lock);
	old = sb->policy;
	sb->policy = fresh;
	memcpy(sb->policy_sha256, sha, sizeof(sb->policy_sha256));
	pthread_rwlock_unlock(&tab->lock);
	if (creds_sandbox_sync(sb, fresh, false) < 0)
		log_err("sandbox: `%s`: cannot save its placeholders", sb->name);
	for (i = 0; i < tab->n_workers; i++)
		loop_post(tab->workers[i].loop, proxy_policy_changed_post, &tab->workers[i]);
	policy_unref(old);
	return 0;
}

int sandbox_approve(struct sandbox_table *tab, const char *name, const char *host, uint16_t port,
		    uint64_t until_ms, struct sl_err *err)
{
	struct sandbox_approval keep, *a;
	struct sandbox *sb;
	size_t i;
	bool added = false;
	int r;

	pthread_rwlock_rdlock(&tab->lock);
	sb = find_name(tab, name);
	pthread_rwlock_unlock(&tab->lock);
	if (!sb) {
		sl_err_set(err, 0, "no such sandbox `%s`", name);
		return -ENOENT;
	}
	if (strlen(host) >= sizeof(keep.host)) {
		sl_err_set(err, 0, "host name too long");
		return -EINVAL;
	}
	if (!sb->approvals) {
		sb->approvals = calloc(POLICY_EXTRA_MAX, sizeof(*sb->approvals));
		if (!sb->approvals)
			return -ENOMEM;
	}
	for (i = 0; i < sb->n_approvals; i++)
		if (sb->approvals[i].port == port && !strcasecmp(sb->approvals[i].host, host))
			break;
	if (i == sb->n_approvals) {
		if (sb->n_approvals >= POLICY_EXTRA_MAX) {
			sl_err_set(
				err, 0,
				"sandbox `%s` has %d approvals already: add them to its policy file "
				"and `sluice update` it",
				name, POLICY_EXTRA_MAX);
			return -ENOSPC;
		}
		added = true;
		sb->n_approvals++;
		memset(&sb->approvals[i], 0, sizeof(sb->approvals[i]));
	}
	a = &sb->approvals[i];
	keep = *a;
	snprintf(a->host, sizeof(a->host), "%s", host);
	a->port = port;
	a->until_ms = until_ms;
	a->until_wall_ms = 0;
	if (until_ms) {
		uint64_t mono = clock_ms_of(CLOCK_MONOTONIC);

		a->until_wall_ms =
			clock_ms_of(CLOCK_REALTIME) + (until_ms > mono ? until_ms - mono : 0);
	}
	/* Saved first, so that a restart keeps it (as an update's policy):
	 * an approval that cannot be saved is not made. */
	r = persist(tab, sb);
	if (r < 0)
		sl_err_set(err, r, "cannot write registration in %s: %s: not approved", tab->dir,
			   strerror(-r));
	else
		r = recompile(tab, sb, err);
	if (r < 0) {
		/* Nothing changed: the approval goes as it came. */
		if (added)
			sb->n_approvals--;
		else
			*a = keep;
		if (persist(tab, sb) < 0)
			log_err("sandbox: `%s`: cannot rewrite its registration in %s without the "
				"approval of %s:%u that failed",
				name, tab->dir, host, port);
		return r;
	}
	if (keep.until_ms && !added)
		tab->timed_approvals--;
	if (until_ms)
		tab->timed_approvals++;
	log_info("sandbox: `%s`: approved %s:%u%s", name, host, port,
		 until_ms ? " for a while" : "");
	return 0;
}

size_t sandbox_approvals_expire(struct sandbox_table *tab, uint64_t now_ms)
{
	struct sandbox *sb;
	struct sl_err err = { 0 };
	size_t i, j, k;

	if (!tab->timed_approvals)
		return 0;
	/* The control thread is the table's only writer: no lock to read it,
	 * and recompile() takes the write lock itself. */
	for (i = 0; i < tab->n; i++) {
		bool gone = false;

		sb = tab->all[i];
		if (!sb->approvals)
			continue;
		for (j = k = 0; j < sb->n_approvals; j++) {
			const struct sandbox_approval *a = &sb->approvals[j];

			if (a->until_ms && a->until_ms <= now_ms) {
				log_info("sandbox: `%s`: approval of %s:%u ended", sb->name,
					 a->host, a->port);
				tab->timed_approvals--;
				gone = true;
				continue;
			}
			sb->approvals[k++] = *a;
		}
		sb->n_approvals = k;
		/* A restart would not restore it anyway (its end is on the
		 * wall clock): rewritten so that the file says what holds. */
		if (gone && persist(tab, sb) < 0)
			log_err("sandbox: `%s`: cannot rewrite its registration in %s", sb->name,
				tab->dir);
		if (gone && recompile(tab, sb, &err) < 0)
			log_err("sandbox: `%s`: an approval ended, but its policy cannot be "
				"compiled again (%s): the old one stays until it can",
				sb->name, sl_err_msg(&err));
	}
	return tab->timed_approvals;
}
