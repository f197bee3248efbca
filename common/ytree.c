// SPDX-License-Identifier: MIT
/* YAML tree builder on libyaml's event parser.
 *
 * The document API of libyaml resolves aliases into shared nodes, which lets
 * a small file expand without bound ("billion laughs"); building the tree
 * from events lets us refuse anchors and aliases outright and bound depth
 * and node count. */
#include "common/ytree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/err.h"

void ytree_free(struct ynode *n)
{
	size_t i;

	if (!n)
		return;
	for (i = 0; i < n->n; i++)
		ytree_free(n->kids[i]);
	free(n->kids);
	free(n->str);
	free(n);
}

static int vfail(struct ytree_error *err, const char *name, unsigned line, unsigned col,
		 const char *fmt, va_list ap)
{
	int k;

	err->line = line;
	err->col = col;
	k = snprintf(err->msg, sizeof(err->msg), "%s:%u:%u: ", name, line, col);
	if (k < 0 || (size_t)k >= sizeof(err->msg))
		k = 0;
	vsnprintf(err->msg + k, sizeof(err->msg) - (size_t)k, fmt, ap);
	return -EINVAL;
}

static int fail_at(struct ytree_error *err, const char *name, unsigned line, unsigned col,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail_at(struct ytree_error *err, const char *name, unsigned line, unsigned col,
		   const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(err, name, line, col, fmt, ap);
	va_end(ap);
	return r;
}

int ytree_fail(struct ytree_error *err, const char *name, const struct ynode *at, const char *fmt,
	       ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vfail(err, name, at ? at->line : 1, at ? at->col : 1, fmt, ap);
	va_end(ap);
	return r;
}

int ytree_error_to_err(const struct ytree_error *ye, struct sl_err *err)
{
	return sl_err_set(err, 0, "%s", ye->msg);
}

const struct ynode *ytree_map_get(const struct ynode *map, const char *key)
{
	size_t i, kl = strlen(key);

	if (!map || map->type != YNODE_MAP)
		return NULL;
	for (i = 0; i + 1 < map->n; i += 2) {
		const struct ynode *k = map->kids[i];

		if (k->type == YNODE_SCALAR && k->len == kl && memcmp(k->str, key, kl) == 0)
			return map->kids[i + 1];
	}
	return NULL;
}

/* The array doubles when n reaches a power of two (0, 1, 2, 4, ...): a
 * list of 100,000 items costs 17 reallocs, not 100,000 (each a copy under
 * ASan, where that list took 50 s to refuse). */
static int add_kid(struct ynode *parent, struct ynode *kid)
{
	size_t n = parent->n;
	struct ynode **k = parent->kids;

	if ((n & (n - 1)) == 0) {
		k = realloc(k, (n ? 2 * n : 1) * sizeof(*k));
		if (!k)
			return -ENOMEM;
		parent->kids = k;
	}
	k[parent->n++] = kid;
	return 0;
}

int ytree_load(const char *name, const char *buf, size_t len, struct ynode **root,
	       struct ytree_error *err)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	struct ynode *stack[YTREE_MAX_DEPTH + 1];
	struct ynode *top = NULL;
	size_t depth = 0, nodes = 0;
	int docs = 0, r = 0, done = 0;

	*root = NULL;
	if (len > YTREE_MAX_BYTES)
		return fail_at(err, name, 1, 1, "file larger than %u bytes", YTREE_MAX_BYTES);
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

	while (!done) {
		struct ynode *n = NULL;
		unsigned line, col;

		if (!yaml_parser_parse(&parser, &ev)) {
			r = fail_at(err, name, (unsigned)parser.problem_mark.line + 1,
				    (unsigned)parser.problem_mark.column + 1,
				    "YAML syntax error: %s%s%s",
				    parser.problem ? parser.problem : "invalid YAML",
				    parser.context ? " " : "",
				    parser.context ? parser.context : "");
			break;
		}
		line = (unsigned)ev.start_mark.line + 1;
		col = (unsigned)ev.start_mark.column + 1;

		switch (ev.type) {
		case YAML_STREAM_END_EVENT:
			done = 1;
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				r = fail_at(err, name, line, col, "more than one YAML document");
			break;
		case YAML_ALIAS_EVENT:
			r = fail_at(err, name, line, col, "YAML aliases are not supported");
			break;
		case YAML_SCALAR_EVENT:
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			const yaml_char_t *anchor, *tag;

			if (ev.type == YAML_SCALAR_EVENT) {
				anchor = ev.data.scalar.anchor;
				tag = ev.data.scalar.tag;
			} else if (ev.type == YAML_SEQUENCE_START_EVENT) {
				anchor = ev.data.sequence_start.anchor;
				tag = ev.data.sequence_start.tag;
			} else {
				anchor = ev.data.mapping_start.anchor;
				tag = ev.data.mapping_start.tag;
			}
			if (anchor) {
				r = fail_at(err, name, line, col, "YAML anchors are not supported");
				break;
			}
			if (tag) {
				r = fail_at(err, name, line, col, "YAML tags are not supported");
				break;
			}
			if (++nodes > YTREE_MAX_NODES) {
				r = fail_at(err, name, line, col, "more than %u YAML nodes",
					    YTREE_MAX_NODES);
				break;
			}
			n = calloc(1, sizeof(*n));
			if (!n) {
				r = -ENOMEM;
				break;
			}
			n->line = line;
			n->col = col;
			if (ev.type == YAML_SCALAR_EVENT) {
				n->type = YNODE_SCALAR;
				n->len = ev.data.scalar.length;
				n->plain = ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
				n->str = malloc(n->len + 1);
				if (!n->str) {
					free(n);
					r = -ENOMEM;
					break;
				}
				memcpy(n->str, ev.data.scalar.value, n->len);
				n->str[n->len] = '\0';
			} else {
				n->type = ev.type == YAML_SEQUENCE_START_EVENT ? YNODE_SEQ
									       : YNODE_MAP;
			}
			if (depth > 0) {
				r = add_kid(stack[depth - 1], n);
				if (r < 0) {
					ytree_free(n);
					break;
				}
			} else if (!top) {
				top = n;
			} else {
				/* Not from libyaml (one root per document, one
				 * document); refused rather than used after free. */
				ytree_free(n);
				r = fail_at(err, name, line, col,
					    "more than one top-level YAML node");
				break;
			}
			if (n->type != YNODE_SCALAR) {
				if (depth >= YTREE_MAX_DEPTH) {
					r = fail_at(err, name, line, col, "nesting deeper than %u",
						    YTREE_MAX_DEPTH);
					break;
				}
				stack[depth++] = n;
			}
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			if (depth > 0)
				depth--;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
		if (r < 0)
			break;
	}
	yaml_parser_delete(&parser);
	if (r < 0) {
		ytree_free(top);
		return r;
	}
	*root = top;
	return 0;
}
