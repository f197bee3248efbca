// SPDX-License-Identifier: MIT
/* The key process's requests: built by the broker, parsed by the key
 * process, which trusts none of it (keys_internal.h has the format). */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "broker/keys/keys_internal.h"
#include "common/text.h"

bool keys_name_ok(const char *s, size_t len)
{
	return text_name_ok(s, len, KEYS_NAME_MAX);
}

int keys_req_parse(const unsigned char *buf, size_t len, struct keys_req *req)
{
	uint32_t op;
	uint16_t hl;

	memset(req, 0, sizeof(*req));
	if (len > KEYS_MSG_MAX)
		return -EMSGSIZE;
	if (!buf || len < sizeof(op))
		return -EINVAL;
	memcpy(&op, buf, sizeof(op));
	buf += sizeof(op);
	len -= sizeof(op);
	if (op == 0 || op >= KEYS_OP_END)
		return -EOPNOTSUPP;
	req->op = (enum keys_op)op;
	switch (req->op) {
	case KEYS_CA_CREATE:
		if (len > KEYS_NAME_MAX)
			return -EMSGSIZE;
		if (!keys_name_ok((const char *)buf, len))
			return -EINVAL;
		memcpy(req->name, buf, len);
		req->name[len] = '\0';
		return 0;
	case KEYS_CA_LOAD:
		if (len > KEYS_DER_MAX)
			return -EMSGSIZE;
		if (len == 0)
			return -EINVAL;
		req->data = buf;
		req->len = len;
		return 0;
	case KEYS_CA_SAVE:
	case KEYS_CA_FORGET:
	case KEYS_CA_DROP:
		if (len != KEYS_ID_LEN)
			return -EINVAL;
		memcpy(req->id, buf, KEYS_ID_LEN);
		return 0;
	case KEYS_LEAF_SIGN:
		if (len < KEYS_ID_LEN + sizeof(hl))
			return -EINVAL;
		memcpy(req->id, buf, KEYS_ID_LEN);
		memcpy(&hl, buf + KEYS_ID_LEN, sizeof(hl));
		buf += KEYS_ID_LEN + sizeof(hl);
		len -= KEYS_ID_LEN + sizeof(hl);
		if (hl > KEYS_HOST_MAX)
			return -EMSGSIZE;
		if (hl == 0 || hl > len || memchr(buf, '\0', hl))
			return -EINVAL;
		memcpy(req->host, buf, hl);
		req->host[hl] = '\0';
		buf += hl;
		len -= hl;
		if (len > KEYS_PUB_MAX)
			return -EMSGSIZE;
		if (len == 0)
			return -EINVAL;
		req->data = buf;
		req->len = len;
		return 0;
	case KEYS_PING:
	case KEYS_CA_SWEEP:
		return len ? -EINVAL : 0;
	case KEYS_JWT_LOAD:
		if (len > KEYS_PATH_MAX)
			return -EMSGSIZE;
		if (len < 2 || buf[0] != '/' || memchr(buf, '\0', len))
			return -EINVAL;
		memcpy(req->path, buf, len);
		req->path[len] = '\0';
		return 0;
	case KEYS_JWT_SIGN:
	case KEYS_JWT_DROP:
		if (len < sizeof(req->handle))
			return -EINVAL;
		memcpy(&req->handle, buf, sizeof(req->handle));
		buf += sizeof(req->handle);
		len -= sizeof(req->handle);
		if (req->op == KEYS_JWT_DROP)
			return len ? -EINVAL : 0;
		if (len > KEYS_TBS_MAX)
			return -EMSGSIZE;
		if (len == 0)
			return -EINVAL;
		req->data = buf;
		req->len = len;
		return 0;
	default:
		return -EOPNOTSUPP;
	}
}

static int put(unsigned char *buf, size_t cap, size_t *at, const void *p, size_t n)
{
	if (n > cap - *at)
		return -EMSGSIZE;
	memcpy(buf + *at, p, n);
	*at += n;
	return 0;
}

int keys_req_build(const struct keys_req *req, unsigned char *buf, size_t cap)
{
	uint32_t op = (uint32_t)req->op;
	size_t at = 0, n;
	uint16_t hl;
	int r;

	if (cap > KEYS_MSG_MAX)
		cap = KEYS_MSG_MAX;
	r = put(buf, cap, &at, &op, sizeof(op));
	if (r < 0)
		return r;
	switch (req->op) {
	case KEYS_CA_CREATE:
		n = strnlen(req->name, sizeof(req->name));
		if (!keys_name_ok(req->name, n))
			return -EINVAL;
		r = put(buf, cap, &at, req->name, n);
		break;
	case KEYS_CA_LOAD:
		if (!req->data || !req->len)
			return -EINVAL;
		if (req->len > KEYS_DER_MAX)
			return -EMSGSIZE;
		r = put(buf, cap, &at, req->data, req->len);
		break;
	case KEYS_CA_SAVE:
	case KEYS_CA_FORGET:
	case KEYS_CA_DROP:
		r = put(buf, cap, &at, req->id, KEYS_ID_LEN);
		break;
	case KEYS_LEAF_SIGN:
		n = strnlen(req->host, sizeof(req->host));
		if (n == 0 || !req->data || !req->len)
			return -EINVAL;
		if (n > KEYS_HOST_MAX || req->len > KEYS_PUB_MAX)
			return -EMSGSIZE;
		hl = (uint16_t)n;
		r = put(buf, cap, &at, req->id, KEYS_ID_LEN);
		if (r == 0)
			r = put(buf, cap, &at, &hl, sizeof(hl));
		if (r == 0)
			r = put(buf, cap, &at, req->host, n);
		if (r == 0)
			r = put(buf, cap, &at, req->data, req->len);
		break;
	case KEYS_PING:
	case KEYS_CA_SWEEP:
		break;
	case KEYS_JWT_LOAD:
		n = strnlen(req->path, sizeof(req->path));
		if (n > KEYS_PATH_MAX)
			return -EMSGSIZE;
		if (n < 2 || req->path[0] != '/')
			return -EINVAL;
		r = put(buf, cap, &at, req->path, n);
		break;
	case KEYS_JWT_SIGN:
	case KEYS_JWT_DROP:
		r = put(buf, cap, &at, &req->handle, sizeof(req->handle));
		if (r < 0 || req->op == KEYS_JWT_DROP)
			break;
		if (!req->data || !req->len)
			return -EINVAL;
		if (req->len > KEYS_TBS_MAX)
			return -EMSGSIZE;
		r = put(buf, cap, &at, req->data, req->len);
		break;
	default:
		return -EINVAL;
	}
	return r < 0 ? r : (int)at;
}
