/* SPDX-License-Identifier: MIT */
/* sluiced's configuration file (YAML, every key optional). */
#ifndef SLUICE_BROKER_CONFIG_H
#define SLUICE_BROKER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/addr.h"

struct sl_err;

#define CONFIG_MAX_RESOLVERS 8

/* The broker's user when  is not set and there is no user :
 * an id no distribution hands out (65534 is nobody, which other daemons
 * share; the broker's files must be its own). */
#define BROKER_DEFAULT_USER "sluice"
#define BROKER_DEFAULT_UID 65533u
#define BROKER_DEFAULT_GID 65533u
/* The key process's, likewise (`key_user`). */
#define BROKER_KEYS_DEFAULT_USER "sluice-keys"
#define BROKER_KEYS_DEFAULT_UID 65532u
#define BROKER_KEYS_DEFAULT_GID 65532u

struct broker_config {
	char control_socket[108];
	char state_dir[256];
	struct sl_addr pool_net; /* sandbox_pool */
	unsigned pool_plen;
	uint16_t proxy_port;	      /* explicit proxy */
	uint16_t transparent_port;    /* redirected TCP */
	uint16_t dns_port;	      /* redirected DNS */
	char upstream_resolvers[512]; /* "ADDR[:PORT],..." for c-ares; "" = resolv.conf */
	char upstream_ca[256];
	char audit_log[256];
	unsigned workers; /* 0: one per core */
	/* The keys a reload changes (broker.c, broker_reload()). The
	 * running broker's cfg is the main thread's own: workers read these
	 * in struct broker_limits (broker_internal.h), an immutable copy
	 * published at each reload. */
	uint32_t max_connections; /* all sandboxes together */
	/* repeats of a refusal within this are folded into one line (0: never) */
	uint32_t audit_fold_ms;
	uint32_t head_timeout_ms;
	uint32_t connect_timeout_ms;
	uint32_t response_timeout_ms; /* request sent -> response head */
	uint32_t resolve_timeout_ms;  /* a name's lookup, all servers and tries */
	uint32_t drain_timeout_ms;
	/* The rest is fixed once the workers run (a reload logs a change to
	 * it as waiting for a restart). */
	uint32_t max_head_bytes;
	uint32_t dns_cache_size;
	struct sl_addr synthetic_net; /* synthetic_pool for the DNS filter */
	unsigned synthetic_plen;
	/* control_group: besides root (and the broker's own uid), a caller
	 * holding this group may use the control socket. Resolved to
	 * control_gid when the file is read (start-up and every reload), so
	 * that an unknown group is a configuration error, not a refusal
	 * later. The main thread alone reads both (control.c). */
	char control_group[64]; /* "" = root only */
	gid_t control_gid;
	/* user: who the broker runs as after start-up (main.c), NAME, UID or
	 * UID:GID, resolved when the file is read. "" (the default): the
	 * system user `sluice` if there is one, else BROKER_DEFAULT_UID:GID.
	 * 0 (root) keeps the broker uid 0, as before, with a warning. A
	 * change takes effect on a restart. */
	char user[64];
	uid_t user_uid;
	gid_t user_gid;
	/* key_user: who the key process runs as (broker/keys/), as `user`.
	 * "" (the default): the system user `sluice-keys` if there is one,
	 * else BROKER_KEYS_DEFAULT_UID:GID. Must not be `user` nor root. Only
	 * when the broker switches user (started as root, `user` not 0);
	 * else the keys stay in the broker, as before. Restart to change. */
	char key_user[64];
	uid_t key_uid;
	gid_t key_gid;
};

/* Fills @c with the documented defaults. */
void broker_config_defaults(struct broker_config *c);

/**
 * broker_config_load() - read a configuration file over the defaults
 * @path: the file
 * @c:    filled on success (untouched on failure)
 * @err:  "FILE:LINE:COL: message" on failure (NULL: not wanted)
 *
 * Return: 0, or a negative errno.
 */
int broker_config_load(const char *path, struct broker_config *c, struct sl_err *err);

#endif
