/* SPDX-License-Identifier: MIT */
/* OAuth2 client-credentials tokens: one cache for the broker, filled and
 * refreshed by a small pool of background threads, read by workers without
 * waiting. */
#ifndef SLUICE_BROKER_TOKENS_H
#define SLUICE_BROKER_TOKENS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cred_secret;
struct policy_credential;
struct tokens_entry;

/* Fetcher threads: fetches of this many entries run at once, so that an
 * endpoint that hangs holds up one thread, never the others' tokens. */
#define TOKENS_FETCHERS 4
/* A token endpoint's answer: at most this many bytes, head included. */
#define TOKENS_RESPONSE_MAX (64 * 1024)
/* A whole fetch (resolve, connect, TLS, request, answer) ends by then. */
#define TOKENS_FETCH_MAX_MS 15000u
/* expires_in 0 or absent: the token is taken to live this long. */
#define TOKENS_DEFAULT_EXPIRES_SEC 300u
/* Retries after a failure: 1 s, 2 s, 4 s ... at most this. */
#define TOKENS_BACKOFF_MAX_MS 60000u
/* creds_load_secrets() waits at most this for a new token's first fetch. */
#define TOKENS_FIRST_WAIT_MS 2000u

struct tokens_config {
	const char *upstream_ca;      /* PEM bundle; NULL or "": the system store */
	const char *resolvers;	      /* as resolver_new(): NULL or "": resolv.conf */
	uint32_t connect_timeout_ms;  /* per address; 0: 10 s */
	uint32_t fetch_timeout_ms;    /* whole fetch; 0 or more than
				       * TOKENS_FETCH_MAX_MS: that */
};

/* What one fetch needs; strings stay valid during the call. */
struct tokens_request {
	const char *cred_name; /* for messages */
	const char *host;      /* DNS name or address literal (no brackets) */
	uint16_t port;
	const char *path;      /* path and query */
	const char *client_id;
	const char *const *scopes;
	size_t n_scopes;
	const struct cred_secret *client_secret;
	int cancel_fd; /* readable (POLLIN) once the fetch must end: poll it
			* with the fetch's own fds, never read it */
};

/**
 * typedef tokens_fetch_fn - get one token (the HTTPS fetch, or a test's)
 * @ctx:        the pointer given with it
 * @rq:         what to ask for
 * @token:      on success, the access token (the cache takes it over)
 * @expires_in: on success, seconds; 0 when the server did not say
 * @err:        on failure, why (an HTTP status, a parse error; never a
 *              secret or a token)
 * @errlen:     its size
 *
 * Called on a fetcher thread, without the cache's lock; up to
 * TOKENS_FETCHERS calls (for different entries, never two for one) may
 * run at once, so it must be thread-safe. It must end promptly once
 * @rq->cancel_fd is readable (tokens_stop() waits for it), returning
 * -ECANCELED.
 *
 * Return: 0 or a negative errno (-ECANCELED when cancelled).
 */
typedef int tokens_fetch_fn(void *ctx, const struct tokens_request *rq,
			    struct cred_secret *token, uint64_t *expires_in,
			    char *err, size_t errlen);

/**
 * tokens_start() - start the TOKENS_FETCHERS fetcher threads (once; later
 * calls return 0)
 * @cfg:    TLS trust, resolvers and timeouts (copied)
 * @err:    on failure, a message
 * @errlen: its size
 *
 * Each thread drops every capability of its own before it fetches (they
 * may be started while the broker still holds them) and takes no
 * signal. All start or none does.
 *
 * Return: 0, or a negative errno (-EINVAL for an unusable upstream_ca).
 */
int tokens_start(const struct tokens_config *cfg, char *err, size_t errlen);

/**
 * tokens_stop() - end the fetcher threads and wipe every cached token
 *
 * Every fetch in flight is abandoned at once (its socket closed), then
 * every thread is joined. Entries stay
 * allocated for the policies that hold them; tokens_copy() answers
 * -EAGAIN from now on. Safe to call when never started, and twice.
 */
void tokens_stop(void);

/**
 * tokens_set_fetch() - replace the HTTPS fetch (unit tests)
 * @fn:  the function, or NULL for the HTTPS fetch
 * @ctx: its argument (shared by the fetcher threads)
 *
 * Call before tokens_start(). Each fetch reads the pair under the cache's
 * lock, so a fetch never sees one without the other.
 */
void tokens_set_fetch(tokens_fetch_fn *fn, void *ctx);

/**
 * tokens_get() - the cache entry for an oauth2 credential, made or shared
 * @c:             an oauth2 credential of a loaded policy
 * @client_secret: its client secret, as just read (copied: a reload that
 *                 reads a rotated secret updates the entry)
 *
 * Entries are keyed by (token_url, client_id, scopes), so a policy reload
 * or another sandbox with the same credential shares the token already
 * fetched. A new entry is fetched at once (tokens_start() first).
 *
 * Return: a reference (tokens_put() it), or NULL with errno set.
 */
struct tokens_entry *tokens_get(const struct policy_credential *c,
				const struct cred_secret *client_secret);

/* Drops a reference; the last one wipes the token and the secret. NULL is fine. */
void tokens_put(struct tokens_entry *e);

/**
 * tokens_copy() - the current access token, for one request
 * @e:   the entry
 * @out: on success, a copy (cred_secret_free() it)
 *
 * Never waits for the network: takes the cache's lock for a copy. When no
 * token is usable, asks the fetchers for one (unless it is backing off
 * after a failure, so that requests cannot hammer a failing endpoint).
 *
 * Return: 0; -EAGAIN when no token is usable now; -ENOMEM.
 */
int tokens_copy(struct tokens_entry *e, struct cred_secret *out);

/**
 * tokens_wait_first() - wait for an entry's first fetch to end
 * @e:  the entry
 * @ms: at most this long
 *
 * For the control thread (a new sandbox's first request then finds its
 * token), never for a worker.
 *
 * Return: true when a token is there.
 */
bool tokens_wait_first(struct tokens_entry *e, unsigned ms);

/* Counters since start. */
struct tokens_stats {
	uint64_t fetch_ok;
	uint64_t fetch_failed;
	size_t entries;
};
void tokens_stats(struct tokens_stats *st);

/* ---- the schedule (pure, for tests) --------------------------------------- */

/*
 * A token fetched now with @expires_in_sec (0: TOKENS_DEFAULT_EXPIRES_SEC)
 * is handed out for tokens_usable_ms() and refreshed after
 * tokens_refresh_ms(): 80% of its life plus up to 5% more (@jitter, any
 * value), so that tokens fetched together do not all refresh together.
 * Handing out stops a tenth of the life (at most 30 s) early, for the
 * clock skew and the time a request takes to arrive.
 */
uint64_t tokens_usable_ms(uint64_t expires_in_sec);
uint64_t tokens_refresh_ms(uint64_t expires_in_sec, uint32_t jitter);
/* The wait before retry number @failures (1 s doubling, capped). */
uint64_t tokens_backoff_ms(unsigned failures);

/**
 * tokens_dechunk() - decode a chunked body (RFC 9112 7.1) in place
 * @buf: the body as received; decoded into its own start
 * @len: its length
 *
 * Chunk extensions are skipped; trailers are ignored.
 *
 * Return: the decoded length; -EAGAIN when the body is not complete;
 * -EBADMSG when malformed.
 */
long tokens_dechunk(char *buf, size_t len);

#endif
