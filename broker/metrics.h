/* SPDX-License-Identifier: MIT */
/* Broker metrics: lock-free counters shared by all worker threads, and their
 * rendering. */
#ifndef SLUICE_BROKER_METRICS_H
#define SLUICE_BROKER_METRICS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every update is a relaxed atomic add: callers need no lock and get no
 * ordering, and a render taken while threads count sees each counter at
 * some recent value (a histogram's _count always equals its +Inf bucket).
 *
 * Labelled counters (decisions, DNS answers) are keyed by strings that are
 * interned on first use into a fixed table. Label values are at most
 * METRICS_LABEL_MAX - 1 bytes of printable ASCII; a key that is longer, not
 * printable, or arrives when the table is full is counted in the family's
 * "other" series (all labels "other"), so the exposition stays bounded.
 */

#define METRICS_DECISION_SLOTS 64
#define METRICS_DNS_ANSWER_SLOTS 16
#define METRICS_LABEL_MAX 48

/**
 * metrics_decision() - count one broker decision
 * @proto:    "http", "connect", "tls", "tcp", "dns"
 * @decision: "allow", "deny", "error"
 * @reason:   the reason as in the audit log and X-Sluice-Reason
 *
 * NULL counts as "". The first use of a key takes a mutex; later ones do not.
 */
void metrics_decision(const char *proto, const char *decision, const char *reason);

/* A connection was accepted (open gauge and accepted total go up). */
void metrics_connection_open(void);
/* An accepted connection ended (open gauge goes down). */
void metrics_connection_close(void);
/* Splice pipes: @held more (or fewer) held by connections, @kept more (or
 * fewer) kept empty by the workers (proxy/tunnel.c proxy_pipe_get()). */
void metrics_pipes(int held, int kept);
/* A splice pipe came out smaller than PIPE_CAP: the broker's user was over
 * its pipe pages (fs.pipe-user-pages-soft). */
void metrics_pipe_small(void);
/* Bytes relayed: @up from the sandbox to the upstream, @down back. */
void metrics_bytes(uint64_t up, uint64_t down);
/* Upstream name resolution answered from the broker's cache, or not. */
void metrics_dns_cache_hit(void);
void metrics_dns_cache_miss(void);

/**
 * metrics_dns_query() - count one DNS filter query by the answer it got
 * @answer: e.g. "synthetic", "nxdomain", "nodata", "refused", "formerr"
 */
void metrics_dns_query(const char *answer);

/**
 * metrics_connect_latency_us() - one upstream connect time, in microseconds
 * @us: time from connect() to the connection being established
 *
 * Buckets (seconds, upper bound inclusive): 0.0005 0.001 0.0025 0.005 0.01
 * 0.025 0.05 0.1 0.25 0.5 1 2.5 5 +Inf.
 */
void metrics_connect_latency_us(uint64_t us);

/**
 * metrics_render_prometheus() - Prometheus text exposition format 0.0.4
 * @buf: output, NUL-terminated on success
 * @len: size of @buf
 *
 * Series: sluice_decisions_total{proto,decision,reason},
 * sluice_open_connections, sluice_splice_pipes{state="held"|"kept"},
 * sluice_splice_pipes_small_total,
 * sluice_connections_total,
 * sluice_bytes_total{direction="up"|"down"}, sluice_dns_cache_hits_total,
 * sluice_dns_cache_misses_total, sluice_dns_queries_total{answer},
 * sluice_audit_write_failures_total, sluice_upstream_connect_seconds
 * (histogram).
 *
 * Return: length written (NUL not counted), or -ENOSPC if @len is too small.
 */
int metrics_render_prometheus(char *buf, size_t len);

/**
 * metrics_render_text() - a short human-readable summary, for `sluice status`
 * @buf: output, NUL-terminated on success
 * @len: size of @buf
 *
 * Return: length written (NUL not counted), or -ENOSPC if @len is too small.
 */
int metrics_render_text(char *buf, size_t len);

/**
 * metrics_reset() - zero every counter and forget every interned key
 *
 * For tests: not safe while other threads update metrics. Audit write
 * failures belong to the audit module and are not reset.
 */
void metrics_reset(void);

#endif
