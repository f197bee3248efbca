/* SPDX-License-Identifier: MIT */
/* A small YAML tree with source positions, built from libyaml events, for
 * the policy and configuration loaders. No anchors, aliases or tags. */
#ifndef SLUICE_COMMON_YTREE_H
#define SLUICE_COMMON_YTREE_H

#include <stdbool.h>
#include <stddef.h>

enum ynode_type { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP };

struct ynode {
	enum ynode_type type;
	unsigned line, col; /* 1-based position of the node's first character */
	char *str;	    /* scalar text, NUL-terminated (may hold NULs: see len) */
	size_t len;
	bool plain;	     /* an unquoted scalar */
	struct ynode **kids; /* seq: items; map: key, value, key, value ... */
	size_t n;
};

struct ytree_error {
	char msg[512]; /* "FILE:LINE:COL: message" */
	unsigned line, col;
};

/* Bounds on untrusted input. */
#define YTREE_MAX_BYTES (1u << 20)
#define YTREE_MAX_DEPTH 32
#define YTREE_MAX_NODES 100000

/**
 * ytree_load() - parse one YAML document into a tree
 * @name: file name used in messages
 * @buf, @len: the text
 * @root: the tree (ytree_free() it); NULL for an empty document
 * @err: on failure, the message with its position
 *
 * Return: 0, -EINVAL on a syntax error or an unsupported feature.
 */
int ytree_load(const char *name, const char *buf, size_t len, struct ynode **root,
	       struct ytree_error *err);
void ytree_free(struct ynode *n); /* accepts NULL */

/* Formats "NAME:LINE:COL: " + message into err; returns -EINVAL. */
int ytree_fail(struct ytree_error *err, const char *name, const struct ynode *at, const char *fmt,
	       ...) __attribute__((format(printf, 4, 5)));

struct sl_err;
/* @ye into @err, for a caller that reports one type: the message as it is
 * (its FILE:LINE:COL in front), errno 0 (a document's error is no system
 * call's). Return: -EINVAL. */
int ytree_error_to_err(const struct ytree_error *ye, struct sl_err *err);

/* The value of key @key in map @map, or NULL. */
const struct ynode *ytree_map_get(const struct ynode *map, const char *key);

#endif
