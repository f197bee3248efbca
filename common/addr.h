/* SPDX-License-Identifier: MIT */
/* Addresses as one 128-bit form: IPv4 is kept as ::ffff:a.b.c.d, so a v4
 * address and its v4-mapped v6 spelling are the same address everywhere. */
#ifndef SLUICE_COMMON_ADDR_H
#define SLUICE_COMMON_ADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sockaddr;
struct sockaddr_storage;

struct sl_addr {
	uint8_t b[16];
};

/* Longest text addr_format() writes, with its NUL ("/128" included for cidr). */
#define ADDR_STRLEN 48

bool addr_is_v4(const struct sl_addr *a);
void addr_from_v4(struct sl_addr *a, uint32_t v4_host_order);
uint32_t addr_v4(const struct sl_addr *a);

/**
 * addr_parse() - parse a numeric address, strictly (inet_pton forms only)
 * @s:   NUL-terminated text; "1.2.3.4" or a v6 form, no brackets, no zone
 * @out: the address
 *
 * Return: 0, or -EINVAL.
 */
int addr_parse(const char *s, struct sl_addr *out);

/**
 * addr_parse_cidr() - parse "ADDR/LEN" or a bare ADDR (a host prefix)
 * @s:    NUL-terminated text
 * @net:  network address
 * @plen: prefix length in the 128-bit space (a v4 /8 is 104)
 *
 * Return: 0; -EINVAL for bad syntax or length; -ERANGE when host bits are set.
 */
int addr_parse_cidr(const char *s, struct sl_addr *net, unsigned *plen);

/* Writes dotted v4 for v4 addresses, RFC 5952 text for v6. */
void addr_format(const struct sl_addr *a, char *buf, size_t len);
/* "NET/LEN", with a v4 length for v4 prefixes. */
void addr_format_cidr(const struct sl_addr *net, unsigned plen, char *buf, size_t len);

bool addr_in_prefix(const struct sl_addr *a, const struct sl_addr *net, unsigned plen);

int addr_from_sockaddr(const struct sockaddr *sa, struct sl_addr *a, uint16_t *port);
/* Fills a sockaddr_in for v4 addresses, sockaddr_in6 otherwise; returns its length. */
unsigned addr_to_sockaddr(const struct sl_addr *a, uint16_t port, struct sockaddr_storage *ss);

#endif
