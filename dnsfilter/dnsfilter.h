/* SPDX-License-Identifier: MIT */
/* The DNS filter: answers a sandbox's queries itself, from its policy and
 * its synthetic address map, and never forwards a query upstream. */
#ifndef SLUICE_DNSFILTER_H
#define SLUICE_DNSFILTER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sl_addr;

/* ------------------------------------------------------------------------
 * DNS wire format (dnsfilter/wire.c)
 *
 * Pure functions over byte buffers: dns_parse_query() reads one query
 * message from a sandbox (untrusted, strictly checked), the dns_build_*()
 * functions write the reply into a caller buffer. Nothing here allocates,
 * logs or keeps state.
 * ------------------------------------------------------------------------ */

#define DNS_HDR_LEN 12
/* Longest name in text form, without the trailing dot (255 wire bytes). */
#define DNS_NAME_TEXT_MAX 253
/* Longest question section: a 255-byte QNAME plus QTYPE and QCLASS. */
#define DNS_QUESTION_MAX (255 + 4)
/* UDP payload limits: without EDNS, and the clamp applied to a requester's. */
#define DNS_UDP_MIN 512
#define DNS_UDP_MAX 4096
/* The payload size we advertise in our OPT RR (the DNS flag day 2020 value). */
#define DNS_OUR_UDP_SIZE 1232
/* Longest EXTRA-TEXT we put in an Extended DNS Error; longer text is cut. */
#define DNS_EDE_TEXT_MAX 128

enum dns_rcode {
	DNS_RCODE_NOERROR = 0,
	DNS_RCODE_FORMERR = 1,
	DNS_RCODE_SERVFAIL = 2,
	DNS_RCODE_NXDOMAIN = 3,
	DNS_RCODE_NOTIMP = 4,
	DNS_RCODE_REFUSED = 5,
	DNS_RCODE_BADVERS = 16, /* extended: needs an OPT RR in the reply */
};

enum dns_type {
	DNS_TYPE_A = 1,
	DNS_TYPE_NS = 2,
	DNS_TYPE_CNAME = 5,
	DNS_TYPE_SOA = 6,
	DNS_TYPE_NULL = 10,
	DNS_TYPE_PTR = 12,
	DNS_TYPE_HINFO = 13,
	DNS_TYPE_MX = 15,
	DNS_TYPE_TXT = 16,
	DNS_TYPE_AAAA = 28,
	DNS_TYPE_SRV = 33,
	DNS_TYPE_NAPTR = 35,
	DNS_TYPE_DNAME = 39,
	DNS_TYPE_OPT = 41,
	DNS_TYPE_DS = 43,
	DNS_TYPE_RRSIG = 46,
	DNS_TYPE_DNSKEY = 48,
	DNS_TYPE_TLSA = 52,
	DNS_TYPE_SVCB = 64,
	DNS_TYPE_HTTPS = 65,
	DNS_TYPE_IXFR = 251,
	DNS_TYPE_AXFR = 252,
	DNS_TYPE_ANY = 255,
	DNS_TYPE_CAA = 257,
};

#define DNS_CLASS_IN 1

/* RFC 8914 Extended DNS Error INFO-CODEs we use. */
#define DNS_EDE_BLOCKED 15
#define DNS_EDE_PROHIBITED 18

/**
 * struct dns_query - one parsed query
 * @id:           message ID, echoed in the reply
 * @opcode:       OPCODE of the query (only 0, QUERY, is answered normally)
 * @rd:           RD flag, echoed
 * @cd:           CD flag, echoed (RFC 4035 3.2.2)
 * @has_question: @name, @qtype, @qclass and @qwire are valid; a reply
 *                carries the question only when this is set
 * @qtype:        QTYPE
 * @qclass:       QCLASS
 * @name_weird:   a label held a '.', a space or a byte outside printable
 *                ASCII; such bytes read '?' in @name and the filter must
 *                refuse the name rather than match it
 * @edns:         the query carried a valid OPT RR; the reply carries one
 * @edns_do:      DNSSEC OK bit, echoed in our OPT RR
 * @edns_badvers: the OPT RR asked for an EDNS version above 0
 * @edns_version: that version
 * @udp_size:     the requester's UDP payload size clamped to
 *                [DNS_UDP_MIN, DNS_UDP_MAX]; DNS_UDP_MIN without EDNS
 * @rcode_hint:   when dns_parse_query() fails with an answerable error,
 *                the RCODE to answer with
 * @qwire_len:    length of the question section (QNAME, QTYPE, QCLASS);
 *                in the query it starts at offset DNS_HDR_LEN
 * @qwire:        a verbatim copy of it, so that the reply echoes the
 *                requester's spelling (0x20 case randomisation survives)
 * @name:         QNAME as lowercased dotted text, no trailing dot, NUL
 *                terminated; "" for the root
 */
struct dns_query {
	uint16_t id;
	uint8_t opcode;
	bool rd;
	bool cd;
	bool has_question;
	uint16_t qtype;
	uint16_t qclass;
	bool name_weird;
	bool edns;
	bool edns_do;
	bool edns_badvers;
	uint8_t edns_version;
	uint16_t udp_size;
	uint16_t rcode_hint;
	uint16_t qwire_len;
	uint8_t qwire[DNS_QUESTION_MAX];
	char name[DNS_NAME_TEXT_MAX + 1];
};

/**
 * dns_parse_query() - parse and check one DNS query message
 * @msg: the message (a UDP payload, or a TCP message without its length
 *       prefix); untrusted
 * @len: its length
 * @q:   filled in; see the return values for which fields are valid
 *
 * Accepted: QR=0, OPCODE QUERY, exactly one question with an uncompressed
 * QNAME (labels of 1..63 bytes, at most 255 wire bytes), no answer or
 * authority records, at most one additional record and that an OPT RR
 * owned by the root, and nothing after the records.
 *
 * Return: 0 when @q is a query to answer (all fields valid);
 * -EINVAL when the message is not worth an answer (shorter than a header,
 * or a response): drop it;
 * -EBADMSG (@q->rcode_hint = FORMERR) or -EOPNOTSUPP (NOTIMP, an OPCODE
 * other than QUERY) or -EPROTONOSUPPORT (BADVERS, also flagged in
 * @q->edns_badvers): answer with dns_build_error(q, q->rcode_hint, ...);
 * @q->id and the flags are valid, and the question when
 * @q->has_question is set.
 */
int dns_parse_query(const uint8_t *msg, size_t len, struct dns_query *q);

/**
 * dns_build_a() - write a NOERROR reply with A records for the question
 * @q:      a query dns_parse_query() accepted (needs @q->has_question)
 * @addrs:  IPv4 addresses (::ffff:a.b.c.d form)
 * @n:      how many; 0 gives an answerless NOERROR reply
 * @ttl:    TTL of each record
 * @udp:    the reply goes over UDP: when it would exceed the requester's
 *          limit (512 bytes, or its EDNS payload size) it is cut to the
 *          question alone with TC set, so that the client retries over TCP
 * @out:    reply buffer
 * @outlen: its size
 *
 * Each answer's owner is a compression pointer to the question's name.
 *
 * Return: length written, -ENOSPC when @out is too small, -EINVAL when @q
 * has no question or an address is not IPv4.
 */
int dns_build_a(const struct dns_query *q, const struct sl_addr *addrs, size_t n, uint32_t ttl,
		bool udp, uint8_t *out, size_t outlen);

/**
 * dns_build_nodata() - write a NOERROR reply without answers (NODATA)
 * @q:      a query dns_parse_query() accepted (needs @q->has_question)
 * @ttl:    how long the client may cache the absence
 * @out:    reply buffer
 * @outlen: its size
 *
 * For an allowed name asked with a type we do not serve (AAAA, TXT, ...).
 * The authority section holds a synthetic SOA so that clients cache the
 * answer (RFC 2308): its owner is the queried name itself (we answer as if
 * every allowed name were the apex of its own zone, and name no real
 * zone), MNAME "sluice.invalid.", RNAME "hostmaster.sluice.invalid.", and
 * both its TTL and its MINIMUM are @ttl.
 *
 * Return: length written, -ENOSPC, or -EINVAL when @q has no question.
 */
int dns_build_nodata(const struct dns_query *q, uint32_t ttl, uint8_t *out, size_t outlen);

/**
 * dns_build_error() - write an error reply
 * @q:        the query (parsed, or failed to parse with an answerable error)
 * @rcode:    DNS_RCODE_*; above 15 only when @q->edns (the upper bits go
 *            into the OPT RR)
 * @ede_code: RFC 8914 INFO-CODE (DNS_EDE_BLOCKED for a name outside the
 *            policy), 0 for none; sent only when @q->edns
 * @ede_text: optional EXTRA-TEXT (UTF-8, cut at DNS_EDE_TEXT_MAX bytes),
 *            or NULL
 * @out:      reply buffer
 * @outlen:   its size
 *
 * The question is echoed when @q->has_question. No SOA is added, so an
 * NXDOMAIN is not cached negatively (RFC 2308 section 5): a policy reload
 * that allows the name takes effect on the client's next query.
 *
 * Return: length written, -ENOSPC, or -EINVAL for an RCODE that cannot be
 * expressed for this query.
 */
int dns_build_error(const struct dns_query *q, uint16_t rcode, uint16_t ede_code,
		    const char *ede_text, uint8_t *out, size_t outlen);

/**
 * dns_tcp_frame_len() - find the next message in a DNS-over-TCP stream
 * @buf: bytes received so far, starting at a two-byte length prefix
 * @len: how many
 *
 * Return: the length of the next message, which starts at @buf + 2, when
 * all of it is in @buf (consume 2 + that many bytes); 0 when more bytes
 * are needed; -EBADMSG when the prefix announces less than a DNS header
 * (close the connection). A caller whose buffer is full while this
 * returns 0 must close the connection as well.
 */
ssize_t dns_tcp_frame_len(const uint8_t *buf, size_t len);

/**
 * dns_type_name() - QTYPE mnemonic for the audit log
 * @qtype: the type
 *
 * Return: a static string such as "A" or "HTTPS"; "OTHER" for a type not
 * in our table.
 */
const char *dns_type_name(uint16_t qtype);

/* Longest dns_qname_text(): 255 wire bytes, each at most "\\DDD". */
#define DNS_QNAME_RAW_MAX (4 * 255 + 1)

/**
 * dns_qname_text() - a question's name as the client sent it, for the audit
 * log's "target"
 * @qwire: the question section as received (struct dns_query's @qwire)
 * @len:   its length
 * @out:   at least DNS_QNAME_RAW_MAX bytes
 * @outlen: size of @out
 *
 * Master-file presentation (RFC 1035 5.1): case kept, labels joined with
 * '.', a '.' or '\\' inside a label escaped with '\\', any byte outside
 * printable ASCII as \\DDD; the root is ".". Unlike struct dns_query's
 * @name nothing is folded, so that a disguised name is logged as it came.
 *
 * Return: the text's length, or -EBADMSG for a malformed name (@out "").
 */
int dns_qname_text(const uint8_t *qwire, size_t len, char *out, size_t outlen);

/* ------------------------------------------------------------------------
 * Synthetic address map (dnsfilter/synth.c)
 *
 * Each sandbox has one: the first time the filter answers an allowed name
 * it hands out the next free address of synthetic_pool, and that name keeps
 * that address for the sandbox's life, so that a connection to the address
 * tells the broker which name the sandbox meant. Maps of two sandboxes are
 * independent (the same address may stand for different names: identity is
 * the source address). The map only grows, up to a fixed bound, and is not
 * persisted: after a broker restart a sandbox's cached answers (TTL
 * DNS_FILTER_TTL) point at addresses the new map does not know.
 * ------------------------------------------------------------------------ */

struct dns_synth;

/* Names one sandbox may have addresses for. */
#define DNS_SYNTH_MAX_NAMES 65536

/**
 * dns_synth_new() - create an empty map
 * @net:       the pool's network address (host bits are ignored)
 * @plen:      its prefix length in the 128-bit space (198.18.0.0/15 is
 *             96 + 15)
 * @max_names: at most this many names ever get an address; fewer when the
 *             pool is smaller (offset 0, the network address, is never
 *             handed out; at most 2^32 - 1 addresses are used)
 *
 * Memory grows with the names handed out, never beyond the bound.
 *
 * Return: the map (free it with dns_synth_free()), or NULL with errno set.
 */
struct dns_synth *dns_synth_new(const struct sl_addr *net, unsigned plen, size_t max_names);

/* Frees @s and every name in it; accepts NULL. No thread may use @s then. */
void dns_synth_free(struct dns_synth *s);

/**
 * dns_synth_get() - the address of @name, handing one out on first use
 * @s:    the map
 * @name: a host name; lower-cased and one trailing dot dropped here, so
 *        "API.Example.com." and "api.example.com" get the same address
 * @out:  the address
 *
 * Thread-safe. A name already in the map costs a lookup under a read lock
 * and no allocation.
 *
 * Return: 0; -ENOSPC when the map is full; -EINVAL for an empty name, one
 * longer than DNS_NAME_TEXT_MAX or one holding a byte outside printable
 * ASCII (space excluded); -ENOMEM.
 */
int dns_synth_get(struct dns_synth *s, const char *name, struct sl_addr *out);

/**
 * dns_synth_name() - the name an address was handed out for
 * @s:    the map
 * @a:    the address (as the sandbox connected to it)
 * @name: receives the name, NUL-terminated
 * @len:  size of @name (DNS_NAME_TEXT_MAX + 1 always suffices)
 *
 * Thread-safe; no allocation.
 *
 * Return: 0; -ENOENT when @a was never handed out by @s; -ENOSPC when
 * @name is too small.
 */
int dns_synth_name(struct dns_synth *s, const struct sl_addr *a, char *name, size_t len);

/* How many names have an address. Thread-safe. */
size_t dns_synth_count(struct dns_synth *s);

/* What a replay of the journal found (dns_synth_journal()). */
struct dns_synth_replay {
	unsigned kept;	  /* names that have their address back */
	unsigned lost;	  /* lines that did not verify or could not be used */
	uint32_t next;	  /* the offset the next new name gets */
	bool missing;	  /* there was no journal */
	bool legacy;	  /* written before checksums: read once, rewritten */
	bool damaged;	  /* checksums or framing did not verify */
	bool hwm_damaged; /* the side file of the mark (PATH.hwm) did not */
};

/**
 * dns_synth_journal() - keep the map across broker restarts
 * @s:      the map
 * @path:   a file in state_dir (format: dnsfilter/synth.c); each name that
 *          gets an address from now on is appended to it with its address
 * @replay: first replay the file (a restart), instead of starting anew
 * @rep:    what the replay found (may be NULL)
 *
 * A replay keeps every record that verifies at the address it names; a
 * damaged or lost record leaves its address a hole, and the next new name
 * gets an address above every one that may have been given before. The
 * file is then rewritten whole, in the current format (a file from before
 * checksums is read the old way once). Once journalled, a new name whose
 * reservation cannot be written is refused (-EIO or -ENOSPC from
 * dns_synth_get()): its address might be given again after a restart.
 *
 * Return: 0, or a negative errno (the map works on, unjournalled).
 */
int dns_synth_journal(struct dns_synth *s, const char *path, bool replay,
		      struct dns_synth_replay *rep);

/* Stops journalling @s (its sandbox is gone): the journal is closed, and
 * no append reaches its file, which its owner may then remove or reuse;
 * names given meanwhile are not journalled. */
void dns_synth_journal_end(struct dns_synth *s);

/* ------------------------------------------------------------------------
 * The filter's decision (dnsfilter/filter.c)
 *
 * One query in, one reply out, from the sandbox's policy and map alone:
 * no upstream query is ever made here (resolution happens when the broker
 * connects). An allowed name gets an A record with its synthetic address,
 * or NODATA for any other type; a name outside the policy, or one that is
 * not a valid host name, gets NXDOMAIN with Extended DNS Error 15
 * (Blocked) when the query has EDNS; a malformed query gets FORMERR.
 * Every reply fits a 512-byte datagram, so TC is never needed in practice;
 * dns_build_a() would set it if a reply did not fit the requester's limit.
 * ------------------------------------------------------------------------ */

struct policy;

/*
 * TTL of synthetic answers and of NODATA, in seconds. Short on purpose:
 * a reload that drops a name from the policy, and a broker restart (the
 * map is not persisted), reach the sandbox's caches within a minute; the
 * cost is one more local query per name per minute, answered from memory.
 */
#define DNS_FILTER_TTL 60

/* Longest dns_filter_result.answer: an IPv6 address or an RCODE name. */
#define DNS_ANSWER_TEXT_MAX 48

/**
 * struct dns_filter_result - what the filter did, for the audit log
 * @name:     the question's name (lower case, no trailing dot); "" when
 *            the message had no readable question
 * @qname:    the same name as the client sent it (dns_qname_text()); ""
 *            when the message had no readable question
 * @type:     QTYPE mnemonic (dns_type_name()), or NULL without a question
 * @answer:   the synthetic address, or "NODATA", "NXDOMAIN", "FORMERR",
 *            "NOTIMP", "BADVERS", "SERVFAIL", "REFUSED"; "DROPPED" when
 *            no reply is sent
 * @decision: "allow", "deny" or "error" (audit and metrics)
 * @reason:   "allowed", "not-allowlisted", "bad-name", "formerr",
 *            "notimp", "badvers", "synthetic-pool-full", "not-a-query"
 *            (no reply), or the reason given to dns_filter_error()
 * @metric:   the label for metrics_dns_query(): "synthetic", "nodata",
 *            "nxdomain", "formerr", "notimp", "badvers", "servfail",
 *            "refused", "dropped"
 * @rcode:    the RCODE sent (meaningless when nothing is sent)
 */
struct dns_filter_result {
	char name[DNS_NAME_TEXT_MAX + 1];
	char qname[DNS_QNAME_RAW_MAX];
	const char *type;
	char answer[DNS_ANSWER_TEXT_MAX];
	const char *decision;
	const char *reason;
	const char *metric;
	uint16_t rcode;
};

/**
 * dns_filter_answer() - answer one query of a sandbox
 * @p:      the sandbox's policy
 * @s:      the sandbox's synthetic map
 * @q:      the query (UDP payload, or a TCP message without its length
 *          prefix); untrusted
 * @qlen:   its length
 * @udp:    the reply goes out over UDP (limits its size; see dns_build_a())
 * @out:    reply buffer; 512 bytes hold any reply this function writes
 * @outlen: its size
 * @res:    always filled
 *
 * Return: the reply's length; 0 when nothing must be sent (a message too
 * short for a header, a response, or @out too small).
 */
int dns_filter_answer(const struct policy *p, struct dns_synth *s, const uint8_t *q, size_t qlen,
		      bool udp, uint8_t *out, size_t outlen, struct dns_filter_result *res);

/**
 * dns_filter_answer_mode() - dns_filter_answer() for a sandbox in audit
 * mode too
 * @audit: a name outside the policy (not a bad name) is answered as an
 *         allowed one is, from the synthetic map (never upstream), and
 *         @res says SL_DECISION_WOULD_DENY with reason "not-allowlisted"
 *
 * Return: as dns_filter_answer().
 */
int dns_filter_answer_mode(const struct policy *p, struct dns_synth *s, bool audit,
			   const uint8_t *q, size_t qlen, bool udp, uint8_t *out, size_t outlen,
			   struct dns_filter_result *res);

/* What the filter does with a name outside the policy (not a bad name). */
enum dns_unlisted {
	DNS_UNLISTED_REFUSE, /* NXDOMAIN, EDE 15 (Blocked) */
	DNS_UNLISTED_AUDIT,  /* audit mode: answered, SL_DECISION_WOULD_DENY */
	DNS_UNLISTED_HOLD,   /* `unlisted: hold`: answered, SL_DECISION_HOLD */
};

/**
 * dns_filter_answer_unlisted() - dns_filter_answer() with a say on names
 * outside the policy
 * @unlisted: DNS_UNLISTED_AUDIT and DNS_UNLISTED_HOLD answer such a name
 *            as an allowed one is (an A query its synthetic address, from
 *            the map, never upstream; any other type NODATA), so that the
 *            client connects and the proxy decides (passes it audited, or
 *            holds it); @res says SL_DECISION_WOULD_DENY or
 *            SL_DECISION_HOLD with reason "not-allowlisted"
 *
 * Return: as dns_filter_answer().
 */
int dns_filter_answer_unlisted(const struct policy *p, struct dns_synth *s,
			       enum dns_unlisted unlisted, const uint8_t *q, size_t qlen, bool udp,
			       uint8_t *out, size_t outlen, struct dns_filter_result *res);

/**
 * dns_filter_error() - answer a query with a fixed error, unread
 * @q:        the query; untrusted
 * @qlen:     its length
 * @rcode:    DNS_RCODE_REFUSED (unknown source, rate limit) or
 *            DNS_RCODE_FORMERR (a datagram too large to read whole)
 * @ede_code: an Extended DNS Error INFO-CODE sent when the query has EDNS,
 *            or 0
 * @decision: copied to @res->decision
 * @reason:   copied to @res->reason
 * @out:      reply buffer (512 bytes hold any reply)
 * @outlen:   its size
 * @res:      always filled; @res->metric is "refused" or "formerr"
 *
 * The query is parsed only to echo its ID and question; its name is never
 * judged.
 *
 * Return: the reply's length; 0 when nothing must be sent.
 */
int dns_filter_error(const uint8_t *q, size_t qlen, uint16_t rcode, uint16_t ede_code,
		     const char *decision, const char *reason, uint8_t *out, size_t outlen,
		     struct dns_filter_result *res);

/* ------------------------------------------------------------------------
 * Query rate limit (dnsfilter/filter.c)
 *
 * A token bucket per sandbox: DNS_RATE_QPS queries a second sustained,
 * DNS_RATE_BURST at once; beyond that a query gets REFUSED. The bucket has
 * no lock of its own: its owner serialises calls.
 * ------------------------------------------------------------------------ */

#define DNS_RATE_QPS 500
#define DNS_RATE_BURST 1000

/* A zero-filled bucket is full. */
struct dns_bucket {
	uint64_t last_ms; /* time of the last refill */
	uint64_t milli;	  /* tokens, in thousandths */
	bool primed;	  /* false: not used yet, i.e. full */
};

/**
 * dns_bucket_take() - take one token if there is one
 * @b:      the bucket
 * @now_ms: a monotonic clock in milliseconds (a clock going backwards
 *          refills nothing)
 * @rate:   tokens added per second
 * @burst:  the bucket's size in tokens
 *
 * Return: true when a token was taken (answer the query).
 */
bool dns_bucket_take(struct dns_bucket *b, uint64_t now_ms, uint32_t rate, uint32_t burst);

/* ------------------------------------------------------------------------
 * The DNS filter server (dnsfilter/server.c)
 *
 * One per worker thread, on that worker's loop. It knows nothing of the
 * broker: what it needs of it (the sandbox a source address names, an
 * audit line, a metric) comes through struct dns_server_ops, so that
 * dnsfilter/ depends on policy/ and common/ only. The sandbox table stays
 * the broker's: the server looks a sandbox up per query and keeps no copy.
 * ------------------------------------------------------------------------ */

struct loop;
struct dns_server;

/*
 * struct dns_client_state - what the server keeps of one sandbox across
 * queries and workers. Embedded in the broker's sandbox, which zero-fills
 * it, initialises @lock, and destroys it when the sandbox is freed.
 */
struct dns_client_state {
	atomic_uint tcp;		 /* its TCP connections, all workers */
	pthread_mutex_t lock;		 /* guards the buckets and the counters */
	struct dns_bucket bucket;	 /* queries answered */
	struct dns_bucket refuse_bucket; /* REFUSED answers over the rate */
	uint64_t limited;		 /* refused for rate since the last report */
	uint64_t dropped;		 /* left unanswered since the last report */
	uint64_t limited_log_ms;	 /* when that report was logged */
};

/*
 * struct dns_client - the sandbox a query came from, as
 * dns_server_ops.lookup() fills it. It holds references (on the sandbox,
 * in @handle, and on @policy) until dns_server_ops.put().
 */
struct dns_client {
	void *handle;		 /* the broker's sandbox: the server never reads it */
	const char *name;	 /* its name, for logs */
	struct policy *policy;	 /* a reference, or NULL */
	struct dns_synth *synth; /* its synthetic map */
	struct dns_client_state *state;
	bool audit; /* in audit mode under @policy */
};

/*
 * struct dns_server_ops - what the broker does for the server, on the
 * worker's thread. Every callback gets the @ctx given to dns_server_start().
 */
struct dns_server_ops {
	/* Fills @c for the sandbox @src names: 0, or -ENOENT for a source
	 * that is no sandbox (@c untouched). */
	int (*lookup)(void *ctx, const struct sl_addr *src, struct dns_client *c);
	/* Drops what lookup() took (the policy only if @c->policy is set). */
	void (*put)(void *ctx, struct dns_client *c);
	/* One audit line for a query from @src:@sport; @c NULL for a source
	 * that is no sandbox. */
	void (*audit)(void *ctx, const struct dns_client *c, const struct sl_addr *src,
		      uint16_t sport, const struct dns_filter_result *res);
	/* Counts one query by the @answer it got and its @decision and @reason. */
	void (*count)(void *ctx, const char *answer, const char *decision, const char *reason);
};

/**
 * dns_server_start() - open one worker's DNS filter sockets
 * @l:    the worker's loop, which the sockets are registered in
 * @id:   the worker's number, for logs
 * @port: UDP and TCP, on 0.0.0.0 with SO_REUSEPORT (one per worker)
 * @ops:  the broker's callbacks; @ops and @ctx must outlive the server
 * @ctx:  passed to each of them
 * @out:  the server, set on success
 *
 * Call before the loop runs, on its thread or while it is not running.
 * Return: 0 or a negative errno (nothing is left open).
 */
int dns_server_start(struct loop *l, unsigned id, uint16_t port, const struct dns_server_ops *ops,
		     void *ctx, struct dns_server **out);

/**
 * dns_server_stop() - close the sockets and TCP connections of @srv, free it
 * @srv: from dns_server_start(), or NULL
 *
 * On the loop's thread, or after the loop has stopped.
 */
void dns_server_stop(struct dns_server *srv);

#endif
