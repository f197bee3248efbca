/* SPDX-License-Identifier: MIT */
/* The control protocol between `sluice` and `sluiced`: its verbs, its
 * answers and its sizes, in one place that both sides include.
 *
 * One request per connection on a unix stream socket: a line of words
 * separated by spaces, ended by '\n', at most CTL_REQ_MAX bytes with it.
 * The broker answers CTL_OK followed by the body, or CTL_ERR followed by
 * a one-line message, and closes; the answer is at most CTL_RESP_MAX
 * bytes. The CLI reads until the broker closes.
 *
 * register with "auto" and "netns" (`sluice create`'s) is the one answer
 * sent in two parts: its head, CTL_OK and the address held for the
 * sandbox and '\n', as soon as the broker holds the address; the rest,
 * the CA's PEM or CTL_ERR and why, once the CA is made and the
 * registration saved. Read whole, a success is the same bytes as in one
 * part; a failure after the head reads "ok\nADDR\nerror: WHY". `sluice
 * create` builds the wire between the two (netns/create.c, reg_read()). */
#ifndef SLUICE_COMMON_CTLPROTO_H
#define SLUICE_COMMON_CTLPROTO_H

#define CTL_REQ_MAX 4096
#define CTL_RESP_MAX (1 << 20)

/* The answers' first bytes. */
#define CTL_OK "ok\n"
#define CTL_ERR "error: "

/* The verbs, and the words each takes after it. */
#define CTL_PING "ping"		/* -> ok */
#define CTL_REGISTER "register" /* NAME ADDR|auto POLICY [netns] [audit] -> ok ADDR\nCA-PEM */
/* register's last word when `sluice create` made the sandbox's namespace,
 * /run/netns/NAME: a registration whose namespace is gone when the broker
 * starts is dropped then. */
#define CTL_REGISTER_NETNS "netns"
/* register's word for `sluice create --audit`: the sandbox runs in audit
 * mode whatever its policy says (and after an update, and a restart). */
#define CTL_REGISTER_AUDIT "audit"
#define CTL_UNREGISTER "unregister"	/* NAME -> ok */
#define CTL_LIST "list"			/* -> ok, "NAME ADDR POLICY CONNS STATE MODE" lines */
#define CTL_STATUS "status"		/* -> ok, "key value" lines */
#define CTL_METRICS "metrics"		/* -> ok, Prometheus text */
#define CTL_JWKS "jwks"			/* -> ok, a JWK Set */
#define CTL_CONFIG "config"		/* -> ok, "key value" lines */
#define CTL_CA "ca"			/* NAME -> ok, the sandbox CA's PEM */
#define CTL_PLACEHOLDERS "placeholders" /* NAME -> ok, "VAR=value" lines */
#define CTL_PRIVILEGED "privileged"	/* NAME -> ok (audited) */
#define CTL_RELOAD "reload"		/* -> ok */
/* NAME POLICY [keep-open] -> ok: swaps one sandbox's policy (an absolute
 * path); keep-open leaves the connections it withdraws open. */
#define CTL_UPDATE "update"
#define CTL_UPDATE_KEEP_OPEN "keep-open"

/* Held requests (`unlisted: hold`). pending [NAME] -> ok, lines
 * "SANDBOX HOST PORT METHOD PATH FIRST_MS COUNT HELD" ("-": not seen;
 * FIRST_MS: Unix time in ms). approve NAME HOST PORT SECONDS -> ok, the
 * YAML rule to add to the policy file (PORT 0: 80 and 443; SECONDS 0: for
 * the sandbox's life). refuse NAME HOST PORT -> ok. */
#define CTL_PENDING "pending"
#define CTL_APPROVE "approve"
#define CTL_REFUSE "refuse"
/* -> ok, then JSON lines until either side closes: {"event":"decision",
 * ...the audit line's fields}, {"event":"pending",...}, {"event":"lost",
 * "lines":N} (the broker's queue was full), {"event":"dropped",...} (this
 * watcher read too slowly: closed). */
#define CTL_WATCH "watch"
/* Error messages the CLI asks again after (bounded), as they pass: */
/* the caller could not be checked because a sandbox being created or
 * deleted has no wire yet, or because it exited before it was checked */
#define CTL_REFUSED "refused: " /* a caller's refusal; says why */
#define CTL_REFUSED_NO_WIRE "have no wire"
#define CTL_REFUSED_GONE "before it could be checked"
/* the broker held as many control connections as it keeps open at once:
 * this one was closed unserved (the oldest that had not sent its request
 * yet, or a new one when every open one was being served) */
#define CTL_BUSY "busy: "

#endif
