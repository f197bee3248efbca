/* SPDX-License-Identifier: MIT */
/* sluice probe: what the probe's files share (options, wire helpers, checks).
 */
#ifndef SLUICE_PROBE_INTERNAL_H
#define SLUICE_PROBE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <netinet/in.h>

struct sl_err;

/*
 * The probe links nothing but libc (bin/sluice-probe is static, so that it
 * can be copied into any container or jail): no libsluice helper, no NSS,
 * no resolver library. It speaks DNS, HTTP/1.1 heads and the first TLS
 * record itself, which is all a verdict needs.
 */

#define PROBE_NAME_MAX 254 /* a DNS name in text, with its NUL */
#define PROBE_LIST_MAX 16  /* entries of a repeatable option */
#define PROBE_DETAIL_MAX 1200
#define PROBE_MAX_CHECKS 96
#define PROBE_PATH_MAX 1024	/* a path given on the command line */
#define PROBE_SOCK_PATH_MAX 108 /* sun_path */
#define PROBE_IDMAP_MAX 16	/* lines of a uid_map the probe reads */

/* An IPv4 or IPv6 address. */
struct probe_ip {
	int af; /* AF_INET, AF_INET6; 0 when unset */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} u;
};

/* HOST[:PORT] as given on the command line. */
struct probe_hostport {
	char host[PROBE_NAME_MAX];
	uint16_t port;
};

/* An address with a port (--dot-addr). */
struct probe_ipport {
	struct probe_ip ip;
	uint16_t port;
};

/* Every option, after parsing; defaults aim at the real world. */
struct probe_opts {
	struct probe_hostport allow[PROBE_LIST_MAX];
	int n_allow;
	struct probe_hostport deny[PROBE_LIST_MAX];
	int n_deny;
	char canary[PROBE_NAME_MAX];
	struct probe_ip resolvers[PROBE_LIST_MAX];
	int n_resolvers;
	struct probe_ip sandbox_resolver; /* af 0: /etc/resolv.conf */
	int timeout_ms;
	int jobs;
	bool json;
	bool list;
	bool help;
	bool selected[PROBE_MAX_CHECKS]; /* after --only / --skip */

	struct probe_ip public4, public6;
	struct probe_ip private4[PROBE_LIST_MAX];
	int n_private4;
	struct probe_ip private6;
	struct probe_ip meta4, meta6, ecs4, alibaba4;
	char metadata_name[PROBE_NAME_MAX];
	struct probe_ip udp_addr;      /* af 0: --public-addr */
	uint16_t udp_port;	       /* 0: a random port */
	char dns_name[PROBE_NAME_MAX]; /* "": first --expect-deny, else
					  example.com */
	char doh_host[PROBE_NAME_MAX];
	struct probe_ip doh_addr;
	struct probe_ipport dot[PROBE_LIST_MAX];
	int n_dot;
	struct probe_ip allowed_addr; /* af 0: not given */
	uint16_t blocked_port;
	char redirect_url[1024];
	char edge_suffix[PROBE_NAME_MAX];
	char edge_prefix[64];
	struct probe_ip gateway; /* af 0: the default route's */
	uint16_t gw_ports[PROBE_LIST_MAX];
	int n_gw_ports;

	/* Containment: the default socket is always tried, these as well. */
	char control_sockets[PROBE_LIST_MAX][PROBE_SOCK_PATH_MAX];
	int n_control_sockets;
	char secret_files[PROBE_LIST_MAX][PROBE_PATH_MAX];
	int n_secret_files;
	int broker_pid; /* 0: not given */
};

/* What the environment and the routing table say, found once before the checks
 * run. */
struct probe_ctx {
	const struct probe_opts *o;
	/* The sandbox's own resolver (--resolver-sandbox or /etc/resolv.conf).
	 */
	bool have_resolver;
	struct probe_ip resolver;
	char resolver_why[160]; /* why there is none */
	/* The proxy of HTTP(S)_PROXY / http(s)_proxy (the HTTPS one for
	 * CONNECT). */
	bool have_proxy;
	struct probe_ip proxy_ip;
	uint16_t proxy_port;
	char proxy_host[PROBE_NAME_MAX];
	char proxy_var[16];  /* which variable */
	char proxy_why[200]; /* why there is none, or why it is unusable */
	/* The gateway: --gateway, else the default route's. */
	bool have_gateway;
	struct probe_ip gateway;
	/* The name checks use as "another host": --dns-name or first
	 * --expect-deny. */
	const char *other_name;
};

enum probe_verdict {
	PROBE_SKIP = 0,
	PROBE_PASS = 1,
	PROBE_FAIL = 2,
};

struct probe_result {
	enum probe_verdict v;
	bool touched; /* a part was added */
	char detail[PROBE_DETAIL_MAX];
};

typedef void (*probe_check_fn)(const struct probe_ctx *ctx, struct probe_result *r);

struct probe_check {
	const char *id;
	const char *desc;
	probe_check_fn fn;
};

/* checks.c */
extern const struct probe_check probe_checks[];
extern const size_t probe_n_checks;
int probe_check_index(const char *id, size_t len);

/* result.c: verdicts. A check adds one part per thing it tried; the
 * verdict is fail if any part failed, else pass if any passed, else skip.
 * A failing part replaces the detail of passing parts, so that the detail
 * names the leak first. */
/* snprintf(3) for texts that are cut on purpose when too long (a detail
 * line is bounded); a function, so that the compiler does not warn about
 * each possible cut. */
void probe_bfmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void probe_res_add(struct probe_result *r, enum probe_verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *probe_verdict_name(enum probe_verdict v);

/* opts.c */
int probe_opts_parse(int argc, char **argv, struct probe_opts *o, struct sl_err *err);
void probe_usage(FILE *f);
int probe_ip_parse(const char *s, struct probe_ip *ip);
void probe_ip_str(const struct probe_ip *ip, char *buf, size_t n);
void probe_ip_url(const struct probe_ip *ip, char *buf, size_t n);
int probe_hostport_parse(const char *s, uint16_t defport, struct probe_hostport *hp);
int probe_timeout_parse(const char *s, int *ms);
int probe_name_check(const char *s);
/* Other spellings of an IPv4 address that inet_aton(3) and many URL
 * parsers accept: 2130706433, 0177.0.0.01, 0x7f.0x0.0x0.0x1, 0x7f000001,
 * 017700000001, 127.1, 0177.0.0.1, 0x7f.0.0.1 (for 127.0.0.1). */
enum {
	PROBE_SPELL_DEC,
	PROBE_SPELL_OCT,
	PROBE_SPELL_HEX,
	PROBE_SPELL_HEXWORD,
	PROBE_SPELL_OCTWORD,
	PROBE_SPELL_SHORT,
	PROBE_SPELL_OCT1, /* the first part octal, the rest decimal: 0177.0.0.1
			   */
	PROBE_SPELL_HEX1, /* the first part hex, the rest decimal: 0x7f.0.0.1 */
	PROBE_N_SPELL
};
void probe_v4_spellings(const struct in_addr *a, char out[PROBE_N_SPELL][40]);

/* contain.c: what a runtime must keep from the code it runs (the host's
 * processes, sluice's control socket, other network namespaces,
 * capabilities over the host, secret files). */
#define PROBE_CONTROL_SOCKET "/run/sluice/sluiced.sock"

/* One line of a uid_map or gid_map: IDs [inside, inside + count) are
 * [outside, outside + count) in the parent user namespace. */
struct probe_idmap {
	int n;
	bool more; /* lines past PROBE_IDMAP_MAX were not kept */
	struct {
		uint32_t inside, outside, count;
	} e[PROBE_IDMAP_MAX];
};

int probe_idmap_parse(const char *text, struct probe_idmap *m);
bool probe_idmap_is_initial(const struct probe_idmap *m);
int probe_idmap_outside(const struct probe_idmap *m, uint32_t inside, uint32_t *outside);
int probe_ns_inode(const char *link, const char *type, unsigned long long *ino);
int probe_status_field(const char *status, const char *name, char *buf, size_t n);
void probe_cap_names(uint64_t caps, char *buf, size_t n);
int probe_status_ppid(const char *stat, int *ppid);

void probe_c_host_processes(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_control_socket(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_netns_run(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_netns_etc(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_caps_init_userns(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_secret_files(const struct probe_ctx *ctx, struct probe_result *r);
void probe_c_vsock(const struct probe_ctx *ctx, struct probe_result *r);

/* out.c */
void probe_sanitize(char *dst, size_t n, const char *src, size_t len);
void probe_print_table(FILE *f, const size_t *idx, const struct probe_result *res, size_t n);
void probe_print_json(FILE *f, const size_t *idx, const struct probe_result *res, size_t n);

/* net.c: one exchange with a peer, every step bounded by a deadline. */
enum probe_xkind {
	PX_ERROR,   /* connect or send failed at once: err */
	PX_TIMEOUT, /* the connect did not finish in time */
	PX_RESET,   /* connected, then reset (err ECONNRESET), no data */
	PX_CLOSED,  /* connected, then closed, no data */
	PX_SILENT,  /* connected (or sent), nothing came back in time */
	PX_DATA,    /* bytes came back: data, len */
	PX_ICMP,    /* a datagram drew an ICMP error: icmp_type, icmp_code */
	PX_NOROUTE, /* no route to the address (checked before sending) */
};

enum probe_rmode {
	PR_NONE,   /* send nothing more, read nothing */
	PR_ANY,	   /* stop at the first bytes */
	PR_HTTP,   /* stop at the end of a response head */
	PR_TLS,	   /* stop once the first record header and handshake type are in
		  */
	PR_DNSTCP, /* stop after one length-prefixed DNS message */
};

struct probe_xchg {
	enum probe_xkind kind;
	int err;
	int timeout_ms; /* the bound that applied, for "no answer within" */
	int icmp_af, icmp_type, icmp_code;
	size_t len;
	char data[8192];
};

long long probe_now_ms(void);
int probe_route_ok(const struct probe_ip *ip);
int probe_tcp_connect(const struct probe_ip *ip, uint16_t port, int timeout_ms,
		      struct probe_xchg *x);
void probe_tcp_talk(int fd, const void *req, size_t reqlen, enum probe_rmode mode, int timeout_ms,
		    struct probe_xchg *x);
void probe_tcp_exchange(const struct probe_ip *ip, uint16_t port, const void *req, size_t reqlen,
			enum probe_rmode mode, int timeout_ms, struct probe_xchg *x);
void probe_udp_exchange(const struct probe_ip *ip, uint16_t port, const void *msg, size_t len,
			int timeout_ms, struct probe_xchg *x);
void probe_xchg_describe(const struct probe_xchg *x, char *buf, size_t n);
const char *probe_icmp_text(int af, int type, int code);
int probe_icmp_echo(const struct probe_ip *ip, bool raw, int timeout_ms, struct probe_xchg *x);
int probe_default_gateway(struct probe_ip *gw);
void probe_random(void *buf, size_t n);

/* dns.c */
#define PROBE_DNS_A 1
#define PROBE_DNS_NULL 10
#define PROBE_DNS_TXT 16
#define PROBE_DNS_AAAA 28
#define PROBE_DNS_ANY 255

struct probe_dns_answer {
	int rcode;
	bool tc;
	int ancount;
	int n_addr;
	struct probe_ip addr[8];
	int n_data; /* records of the asked type that are not addresses (TXT,
		       NULL, ...) */
	int n_types;
	uint16_t types[16]; /* the types in the answer section, in order,
			       deduplicated */
	int ede;	    /* Extended DNS Error INFO-CODE (RFC 8914), -1 when none */
	char ede_text[64];  /* its EXTRA-TEXT, sanitized */
};

int probe_dns_build(uint8_t *buf, size_t cap, uint16_t id, const char *name, uint16_t qtype);
int probe_dns_parse(const uint8_t *msg, size_t len, uint16_t id, uint16_t qtype,
		    struct probe_dns_answer *a);
const char *probe_dns_rcode_name(int rcode);
const char *probe_dns_type_name(uint16_t t, char *buf, size_t n);
void probe_dns_describe(const struct probe_dns_answer *a, char *buf, size_t n);
int probe_dns_query(const struct probe_ip *server, bool tcp, const char *name, uint16_t qtype,
		    int timeout_ms, struct probe_dns_answer *a, char *why, size_t whylen);
int probe_resolv_conf(const char *path, struct probe_ip *ns);

/* proto.c: HTTP heads, URLs, the TLS ClientHello. */
struct probe_http_resp {
	int status;
	char reason_phrase[64];
	char sluice_reason[96]; /* X-Sluice-Reason, "" when absent */
	char location[256];
};

struct probe_url {
	bool https;
	char host[PROBE_NAME_MAX];
	bool host_is_ip;
	struct probe_ip ip;
	uint16_t port;
	char path[512];
};

int probe_http_parse(const char *buf, size_t len, struct probe_http_resp *resp);
int probe_url_parse(const char *url, struct probe_url *u);
int probe_proxy_parse(const char *val, char *host, size_t hostlen, uint16_t *port);
size_t probe_tls_client_hello(uint8_t *buf, size_t cap, const char *sni);

enum probe_tls_answer {
	PT_NOTHING,
	PT_SERVER_HELLO,
	PT_ALERT,
	PT_OTHER_TLS,
	PT_NOT_TLS,
};
enum probe_tls_answer probe_tls_classify(const uint8_t *buf, size_t len);

#endif
