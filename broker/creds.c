// SPDX-License-Identifier: MIT
/* The broker's credentials: secrets loaded with each policy, and each
 * sandbox's placeholders.
 *
 * Theory of operation: a policy's secrets are read (file or environment of
 * the broker) when the policy is loaded or reloaded, and attached to the
 * compiled policy, so a connection that holds the policy holds the secrets
 * it may inject, and they are wiped when the last holder lets go. A
 * sandbox's placeholders live in its cred_table; they are written to
 * state_dir/placeholders/NAME (mode 0600: placeholders, never secrets) so
 * that a broker restart keeps the sandbox's environment valid, and revoked
 * with the sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "broker/broker_internal.h"
#include "broker/cred.h"
#include "common/log.h"
#include "policy/policy.h"

struct secrets {
	size_t n;
	struct cred_secret *s; /* by policy credential index; empty buf: none */
	const struct cred_secret **ptr; /* the same, as cred_rewrite_request() takes them */
};

static char ph_dir[300];

static void secrets_free(void *arg)
{
	struct secrets *sec = arg;
	size_t i;

	if (!sec)
		return;
	for (i = 0; i < sec->n; i++)
		cred_secret_free(&sec->s[i]);
	free(sec->s);
	free(sec->ptr);
	free(sec);
}

int creds_init(const char *state_dir)
{
	snprintf(ph_dir, sizeof(ph_dir), "%s/placeholders", state_dir);
	if (mkdir(ph_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int creds_load_secrets(struct policy *p, char *err, size_t errlen)
{
	size_t i, n = policy_credential_count(p);
	struct secrets *sec;
	int r;

	if (n == 0)
		return 0;
	sec = calloc(1, sizeof(*sec));
	if (!sec)
		return -ENOMEM;
	sec->n = n;
	sec->s = calloc(n, sizeof(*sec->s));
	sec->ptr = calloc(n, sizeof(*sec->ptr));
	if (!sec->s || !sec->ptr) {
		secrets_free(sec);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		/* Fail closed: a credential whose secret cannot be read makes
		 * the policy unusable, rather than requests without it. */
		r = cred_secret_load(policy_credential_get(p, i), &sec->s[i], err, errlen);
		if (r < 0) {
			secrets_free(sec);
			return r;
		}
		sec->ptr[i] = &sec->s[i];
	}
	policy_attach(p, sec, secrets_free);
	return 0;
}

const struct cred_secret *const *creds_secrets(const struct policy *p)
{
	const struct secrets *sec = policy_attachment(p);

	return sec ? sec->ptr : NULL;
}

int creds_acquire(const struct policy *p, const struct sandbox *sb, const char *host,
		  const struct cred_plan *plan, const struct cred_secret **out,
		  struct cred_secret *held)
{
	const struct cred_secret *const *secrets = creds_secrets(p);
	size_t i;

	(void)sb;
	(void)host;
	(void)held;
	if (!secrets)
		return -ENOKEY;
	for (i = 0; i < plan->nuse; i++) {
		int idx = plan->use[i];

		if (idx < 0 || idx >= CREDS_MAX || !secrets[idx] || !secrets[idx]->len)
			return -ENOKEY;
		out[idx] = secrets[idx];
	}
	return 0;
}

void creds_release(struct cred_secret *held)
{
	size_t i;

	for (i = 0; i < CRED_MAX_USES; i++)
		cred_secret_free(&held[i]);
}

static int save_one(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	FILE *f = arg;

	if (!revoked)
		fprintf(f, "%s %s %llu\n", ph, cred, (unsigned long long)expires);
	return 0;
}

static int save(struct sandbox *sb)
{
	char path[600], tmp[620];
	FILE *f;
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		close(fd);
		unlink(tmp);
		return -ENOMEM;
	}
	cred_table_foreach(sb->creds, save_one, f);
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		r = -errno;
	fclose(f);
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

struct has_arg {
	const char *cred;
	uint64_t now;
	bool found;
};

static int has_live(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct has_arg *h = arg;

	(void)ph;
	if (!revoked && strcmp(cred, h->cred) == 0 && (expires == 0 || expires > h->now))
		h->found = true;
	return 0;
}

/*
 * Gives every credential with a placeholder one live placeholder; called at
 * registration (after a restore too) and after a reload. Expired ones are
 * not renewed here: a ttl is the placeholder's life, and a new one comes
 * with a new sandbox.
 */
int creds_sandbox_sync(struct sandbox *sb, struct policy *p, bool issue_expired)
{
	uint64_t now = (uint64_t)time(NULL);
	size_t i;
	bool changed = false;
	int r;

	for (i = 0; i < policy_credential_count(p); i++) {
		const struct policy_credential *c = policy_credential_get(p, i);
		struct has_arg h = { .cred = c->name, .now = now };
		char ph[CRED_PLACEHOLDER_LEN + 1];

		if (!c->placeholder)
			continue;
		cred_table_foreach(sb->creds, has_live, &h);
		if (h.found)
			continue;
		if (!issue_expired) {
			/* Known but expired: it stays expired. */
			struct has_arg any = { .cred = c->name, .now = 0 };

			cred_table_foreach(sb->creds, has_live, &any);
			if (any.found)
				continue;
		}
		r = cred_table_issue(sb->creds, c->name, now, c->ttl_sec, ph);
		explicit_bzero(ph, sizeof(ph));
		if (r < 0)
			return r;
		changed = true;
	}
	return changed ? save(sb) : 0;
}

int creds_sandbox_init(struct sandbox *sb, struct policy *p, bool restore)
{
	char path[600], line[256];
	FILE *f;

	sb->creds = cred_table_new();
	if (!sb->creds)
		return -ENOMEM;
	snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name);
	if (!restore) {
		unlink(path);
		return creds_sandbox_sync(sb, p, true);
	}
	f = fopen(path, "re");
	if (f) {
		while (fgets(line, sizeof(line), f)) {
			char ph[64], cred[CRED_NAME_MAX + 1];
			unsigned long long exp;

			if (sscanf(line, "%63s %64s %llu", ph, cred, &exp) == 3)
				cred_table_insert(sb->creds, ph, cred, exp);
		}
		explicit_bzero(line, sizeof(line));
		fclose(f);
	}
	return creds_sandbox_sync(sb, p, false);
}

void creds_sandbox_forget(struct sandbox *sb)
{
	char path[600];

	if (sb->creds)
		cred_table_revoke(sb->creds, NULL);
	snprintf(path, sizeof(path), "%s/%s", ph_dir, sb->name);
	unlink(path);
}

struct env_arg {
	const struct policy *p;
	uint64_t now;
	char *out;
	size_t len, o;
	bool full;
};

static int env_one(const char *ph, const char *cred, uint64_t expires, bool revoked, void *arg)
{
	struct env_arg *e = arg;
	size_t i;

	if (revoked || (expires && expires <= e->now))
		return 0;
	for (i = 0; i < policy_credential_count(e->p); i++) {
		const struct policy_credential *c = policy_credential_get(e->p, i);
		int k;

		if (!c->placeholder || strcmp(c->name, cred) != 0)
			continue;
		k = snprintf(e->out + e->o, e->len - e->o, "%s=%s\n", c->placeholder, ph);
		if (k < 0 || (size_t)k >= e->len - e->o) {
			e->full = true;
			return 1;
		}
		e->o += (size_t)k;
	}
	return 0;
}

int creds_env(struct sandbox *sb, const struct policy *p, char *out, size_t len)
{
	struct env_arg e = { .p = p, .now = (uint64_t)time(NULL), .out = out, .len = len };

	if (len)
		out[0] = '\0';
	if (sb->creds)
		cred_table_foreach(sb->creds, env_one, &e);
	return e.full ? -ENOSPC : (int)e.o;
}
