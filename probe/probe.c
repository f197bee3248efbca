// SPDX-License-Identifier: MIT
/* sluice probe: the entry point. Finds the resolver, proxy and gateway, runs
 * the checks (bounded parallelism, each in a child process with a hard
 * deadline), and reports.
 *
 * Theory of operation: every check runs in a forked child that writes its
 * verdict and detail to a pipe and exits; at most --jobs run at once. The
 * parent waits on the pipes with poll(2) and kills a child (by its PID)
 * that outlives its bound, which is then reported as a failure: a check
 * that cannot finish proves nothing. Each network step inside a check is
 * bounded by --timeout, so the bound of a whole run is the number of checks
 * times that of one check, divided by --jobs.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/err.h"
#include "common/json.h"
#include "probe/probe.h"
#include "probe/probe_internal.h"

/* The network steps (each bounded by --timeout, a connect and an answer
 * each up to that long) a check may take: a base, and more per target the
 * options add; plus slack. Generous: a check killed at this bound fails. */
#define CHECK_STEPS 16
#define CHECK_STEPS_PER_TARGET 4
#define CHECK_SLACK_MS 2000

struct slot {
	pid_t pid;
	int fd;
	size_t idx; /* into the run order */
	long long deadline;
	size_t len;
	char buf[PROBE_DETAIL_MAX + 8];
};

static void find_resolver(struct probe_ctx *ctx, const struct probe_opts *o)
{
	if (o->sandbox_resolver.af) {
		ctx->resolver = o->sandbox_resolver;
		ctx->have_resolver = true;
	} else if (probe_resolv_conf("/etc/resolv.conf", &ctx->resolver) == 0) {
		ctx->have_resolver = true;
	} else {
		snprintf(ctx->resolver_why, sizeof(ctx->resolver_why),
			 "no nameserver in /etc/resolv.conf, and no "
			 "--resolver-sandbox");
	}
}

static void find_proxy(struct probe_ctx *ctx)
{
	static const char *const vars[] = { "HTTPS_PROXY", "https_proxy", "HTTP_PROXY",
					    "http_proxy" };
	const char *val = NULL;
	char why[200];
	size_t i;
	int r;

	for (i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		val = getenv(vars[i]);
		if (val && *val)
			break;
		val = NULL;
	}
	if (!val) {
		snprintf(ctx->proxy_why, sizeof(ctx->proxy_why),
			 "no proxy variable is set (HTTPS_PROXY, https_proxy, "
			 "HTTP_PROXY, http_proxy)");
		return;
	}
	snprintf(ctx->proxy_var, sizeof(ctx->proxy_var), "%s", vars[i]);
	r = probe_proxy_parse(val, ctx->proxy_host, sizeof(ctx->proxy_host), &ctx->proxy_port);
	if (r == -ENOTSUP) {
		snprintf(ctx->proxy_why, sizeof(ctx->proxy_why),
			 "%s is not an http:// proxy (the probe speaks plain "
			 "HTTP to proxies)",
			 vars[i]);
		return;
	}
	if (r < 0) {
		snprintf(ctx->proxy_why, sizeof(ctx->proxy_why), "%s is not a proxy URL", vars[i]);
		return;
	}
	if (probe_ip_parse(ctx->proxy_host, &ctx->proxy_ip) == 0) {
		ctx->have_proxy = true;
		return;
	}
	if (!ctx->have_resolver) {
		snprintf(ctx->proxy_why, sizeof(ctx->proxy_why),
			 "%s names the host `%.64s`, and there is no resolver "
			 "for it",
			 vars[i], ctx->proxy_host);
		return;
	}
	{
		struct probe_dns_answer a;

		r = probe_dns_query(&ctx->resolver, false, ctx->proxy_host, PROBE_DNS_A,
				    ctx->o->timeout_ms, &a, why, sizeof(why));
		if (r == 0 && a.n_addr && a.addr[0].af == AF_INET) {
			ctx->proxy_ip = a.addr[0];
			ctx->have_proxy = true;
			return;
		}
		if (r == 0)
			probe_dns_describe(&a, why, sizeof(why));
		snprintf(ctx->proxy_why, sizeof(ctx->proxy_why),
			 "%s names the host `%.64s`, which does not resolve (%.80s)", vars[i],
			 ctx->proxy_host, why);
	}
}

static void context(struct probe_ctx *ctx, const struct probe_opts *o)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->o = o;
	find_resolver(ctx, o);
	find_proxy(ctx);
	if (o->gateway.af) {
		ctx->gateway = o->gateway;
		ctx->have_gateway = true;
	} else if (probe_default_gateway(&ctx->gateway) == 0) {
		ctx->have_gateway = true;
	}
	if (o->dns_name[0])
		ctx->other_name = o->dns_name;
	else if (o->n_deny && probe_ip_parse(o->deny[0].host, &(struct probe_ip){ 0 }) < 0)
		ctx->other_name = o->deny[0].host;
	else
		ctx->other_name = "example.com";
}

/* In the child: run one check and write "V detail" to @fd. */
static void __attribute__((noreturn)) child(const struct probe_ctx *ctx, size_t ci, int fd)
{
	struct probe_result r;
	char out[PROBE_DETAIL_MAX + 8];
	int n;

	signal(SIGPIPE, SIG_IGN);
	memset(&r, 0, sizeof(r));
	probe_checks[ci].fn(ctx, &r);
	if (!r.touched) /* a check that decided nothing has a bug: never a
			   silent pass */
		probe_res_add(&r, PROBE_FAIL, "the check reached no verdict (a probe bug)");
	n = snprintf(out, sizeof(out), "%d %s", (int)r.v, r.detail);
	if (n > (int)sizeof(out) - 1)
		n = (int)sizeof(out) - 1;
	if (write(fd, out, (size_t)n) < 0)
		_exit(3);
	_exit(0);
}

static void finish(struct slot *s, struct probe_result *res, bool killed, long long bound_ms)
{
	int status;

	waitpid(s->pid, &status, 0);
	close(s->fd);
	memset(res, 0, sizeof(*res));
	if (killed) {
		probe_res_add(res, PROBE_FAIL,
			      "the check did not finish within %llds (the "
			      "probe's own bound): inconclusive",
			      bound_ms / 1000);
	} else if (s->len >= 2 && s->buf[0] >= '0' && s->buf[0] <= '2' && s->buf[1] == ' ') {
		s->buf[s->len] = '\0';
		res->v = (enum probe_verdict)(s->buf[0] - '0');
		res->touched = true;
		snprintf(res->detail, sizeof(res->detail), "%s", s->buf + 2);
	} else {
		probe_res_add(res, PROBE_FAIL, "the check ended without a verdict (status %d)",
			      status);
	}
	s->pid = 0;
}

/* Run the checks @order[0..n) with at most o->jobs at once; results into @res.
 */
static int run(const struct probe_ctx *ctx, const size_t *order, size_t n, struct probe_result *res)
{
	const struct probe_opts *o = ctx->o;
	long long bound =
		(long long)o->timeout_ms *
			(CHECK_STEPS +
			 CHECK_STEPS_PER_TARGET * (o->n_allow + o->n_deny + o->n_private4 +
						   o->n_resolvers + o->n_dot + o->n_gw_ports)) +
		CHECK_SLACK_MS;
	struct slot *slots = calloc((size_t)o->jobs, sizeof(*slots));
	size_t next = 0, done = 0;
	int j;

	if (!slots)
		return -ENOMEM;
	fflush(NULL); /* nothing buffered may be written twice by a child */
	while (done < n) {
		struct pollfd pfd[32];
		int map[32], np = 0;
		long long now = probe_now_ms(), wait_ms = bound;

		for (j = 0; j < o->jobs && next < n; j++) {
			int p[2];

			if (slots[j].pid)
				continue;
			if (pipe2(p, O_CLOEXEC) < 0) {
				memset(&res[next], 0, sizeof(res[next]));
				probe_res_add(&res[next], PROBE_FAIL, "cannot make a pipe: %s",
					      strerror(errno));
				next++;
				done++;
				continue;
			}
			slots[j].pid = fork();
			if (slots[j].pid == 0) {
				close(p[0]);
				child(ctx, order[next], p[1]);
			}
			close(p[1]);
			if (slots[j].pid < 0) {
				close(p[0]);
				slots[j].pid = 0;
				memset(&res[next], 0, sizeof(res[next]));
				probe_res_add(&res[next], PROBE_FAIL, "cannot fork: %s",
					      strerror(errno));
				next++;
				done++;
				continue;
			}
			slots[j].fd = p[0];
			slots[j].idx = next++;
			slots[j].len = 0;
			slots[j].deadline = probe_now_ms() + bound;
		}
		for (j = 0; j < o->jobs; j++) {
			if (!slots[j].pid)
				continue;
			pfd[np].fd = slots[j].fd;
			pfd[np].events = POLLIN;
			map[np++] = j;
			if (slots[j].deadline - now < wait_ms)
				wait_ms = slots[j].deadline - now;
		}
		if (np == 0)
			continue;
		if (poll(pfd, (nfds_t)np, wait_ms > 0 ? (int)wait_ms : 0) < 0 && errno != EINTR)
			break;
		now = probe_now_ms();
		for (int k = 0; k < np; k++) {
			struct slot *s = &slots[map[k]];

			if (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) {
				ssize_t got =
					read(s->fd, s->buf + s->len, sizeof(s->buf) - 1 - s->len);

				if (got > 0 && s->len + (size_t)got < sizeof(s->buf) - 1) {
					s->len += (size_t)got;
					continue;
				}
				if (got > 0)
					s->len += (size_t)got;
				finish(s, &res[s->idx], false, bound);
				done++;
			} else if (now >= s->deadline) {
				kill(s->pid, SIGKILL);
				finish(s, &res[s->idx], true, bound);
				done++;
			}
		}
	}
	/* Only on a failed poll: end what still runs, by PID. */
	for (j = 0; j < o->jobs; j++) {
		if (slots[j].pid) {
			kill(slots[j].pid, SIGKILL);
			finish(&slots[j], &res[slots[j].idx], true, bound);
		}
	}
	free(slots);
	return 0;
}

/**
 * probe_main() - `sluice probe ARGS` and `sluice-probe ARGS`.
 * @argc: argument count
 * @argv: arguments; argv[0] is the command
 *
 * Return: 0 every check run passed or was skipped, 1 a check failed, 2 misuse.
 */
int probe_main(int argc, char **argv)
{
	struct probe_opts *o = calloc(1, sizeof(*o));
	struct probe_result *res = NULL;
	size_t *order = NULL, n = 0, i;
	struct probe_ctx ctx;
	struct sl_err err = { 0 };
	int rc = 2;

	if (!o) {
		fprintf(stderr, "sluice probe: out of memory\n");
		return 2;
	}
	if (probe_opts_parse(argc, argv, o, &err) < 0) {
		fprintf(stderr,
			"sluice probe: %s\n(sluice probe --help shows the "
			"options)\n",
			sl_err_msg(&err));
		goto out;
	}
	if (o->help) {
		probe_usage(stdout);
		rc = 0;
		goto out;
	}
	if (o->list) {
		bool first = true;

		/* As the report's JSON lists them, without a verdict. */
		if (o->json)
			printf("{\"checks\":[");
		for (i = 0; i < probe_n_checks; i++) {
			if (!o->selected[i])
				continue;
			if (!o->json) {
				printf("%-24s %s\n", probe_checks[i].id, probe_checks[i].desc);
				continue;
			}
			printf("%s\n{\"id\":", first ? "" : ",");
			sl_json_print_string(stdout, probe_checks[i].id);
			printf(",\"description\":");
			sl_json_print_string(stdout, probe_checks[i].desc);
			printf("}");
			first = false;
		}
		if (o->json)
			printf("\n]}\n");
		rc = 0;
		goto out;
	}
	order = calloc(probe_n_checks, sizeof(*order));
	res = calloc(probe_n_checks, sizeof(*res));
	if (!order || !res) {
		fprintf(stderr, "sluice probe: out of memory\n");
		goto out;
	}
	for (i = 0; i < probe_n_checks; i++)
		if (o->selected[i])
			order[n++] = i;
	if (n == 0) {
		fprintf(stderr, "sluice probe: --only and --skip leave no check to run\n");
		goto out;
	}
	context(&ctx, o);
	if (run(&ctx, order, n, res) < 0) {
		fprintf(stderr, "sluice probe: out of memory\n");
		goto out;
	}
	if (o->json)
		probe_print_json(stdout, order, res, n);
	else
		probe_print_table(stdout, order, res, n);
	rc = 0;
	for (i = 0; i < n; i++)
		if (res[i].v == PROBE_FAIL)
			rc = 1;
	if (fflush(stdout) != 0) {
		fprintf(stderr, "sluice probe: cannot write the report: %s\n", strerror(errno));
		rc = 2;
	}
out:
	free(order);
	free(res);
	free(o);
	return rc;
}
