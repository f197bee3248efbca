/* SPDX-License-Identifier: MIT */
/* State shared by the files of sluiced: sandboxes, workers, connections. */
#ifndef SLUICE_BROKER_INTERNAL_H
#define SLUICE_BROKER_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "broker/config.h"
#include "broker/loop.h"
#include "broker/resolve.h"
#include "common/addr.h"

struct policy;
struct http_request;
struct conn;

#define SANDBOX_NAME_MAX 63
#define SANDBOX_MAX 65536

/*
 * A registered sandbox. Shared by reference between the control thread
 * (which owns the table) and workers (which hold a reference per
 * connection). The policy pointer changes only under the table's write lock.
 */
struct sandbox {
	atomic_int refs;
	char name[SANDBOX_NAME_MAX + 1];
	struct sl_addr addr;
	char policy_path[256];
	struct policy *policy;
	atomic_uint conns;
	atomic_bool dead;
};

/* sandbox.c */
int sandbox_table_init(const struct broker_config *cfg);
/* Looks up the sandbox of a source address: takes a reference on it and on
 * its policy (*pol); both dropped by the caller. NULL when unknown. */
struct sandbox *sandbox_lookup(const struct sl_addr *src, struct policy **pol);
void sandbox_put(struct sandbox *sb);
/* @addr "auto" allocates the next free /30 of sandbox_pool; the address
 * registered is written to *@assigned when not NULL. */
int sandbox_register(const char *name, const char *addr, const char *policy_path,
		     bool persist, struct sl_addr *assigned, char *err, size_t errlen);
int sandbox_unregister(const char *name, char *err, size_t errlen);
/* Writes "NAME ADDR POLICY" lines; returns the length or -ENOSPC. */
int sandbox_list(char *buf, size_t len);
size_t sandbox_count(void);
/* Reloads every policy; all or nothing. */
int sandbox_reload_all(char *err, size_t errlen);
int sandbox_restore(char *err, size_t errlen);

/* A worker: one thread, one loop, one resolver, its listeners. */
struct worker {
	unsigned id;
	pthread_t thread;
	struct loop *loop;
	struct resolver *resolver;
	struct ev proxy_ev;
	struct conn *conns; /* doubly linked through conn->next/prev */
	atomic_uint n_conns;
	bool draining;
};

struct broker {
	struct broker_config cfg;
	struct worker *workers;
	unsigned n_workers;
	atomic_uint total_conns;
	atomic_bool draining;
	struct sl_addr local[64]; /* the broker namespace's own addresses */
	size_t n_local;
};

extern struct broker broker;

/* proxy.c */
void proxy_accept(struct ev *ev, uint32_t events);
/* Posted to each worker with a sandbox reference, which it drops: closes
 * that worker's connections of the (now dead) sandbox. */
void proxy_close_sandbox_post(void *sandbox);
void proxy_close_all(struct worker *w);

/* control.c */
int control_open(const char *path);
void control_accept(struct ev *ev, uint32_t events);

void proxy_set_worker(struct worker *w);

/* main.c */
bool broker_is_local(const struct sl_addr *a, uint16_t port);
/* Reloads configuration and every policy; all or nothing. */
int broker_reload(char *err, size_t errlen);

#endif
