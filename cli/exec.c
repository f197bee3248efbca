// SPDX-License-Identifier: MIT
/* Running programs in a sandbox: `sluice exec NAME [--] CMD`, `sluice env
 * NAME`, and `sluice run --policy FILE [--name N] -- CMD` (create, exec as
 * a child, delete, exit with the child's status). A program in a sandbox
 * gets the sandbox's network namespace, a private mount namespace in which
 * /etc/resolv.conf is the sandbox's (the gateway) and /sys shows the
 * sandbox's links, and the environment of DESIGN.md; contained by
 * runner.c unless --privileged. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/err.h"
#include "netns/netns.h"
#include "cli/runner.h"
#include "netns/netns_internal.h"

/**
 * cli_sandbox_enter() - move this process into a sandbox for good
 * @sb:     the sandbox
 * @err:    why not (NULL: not wanted)
 *
 * Joins the sandbox's network namespace and a new mount namespace of its
 * own, private so that nothing mounted here leaks out, with the sandbox's
 * resolv.conf over /etc/resolv.conf and /sys remounted for the sandbox
 * (as `ip netns exec` does). There is no way back: call it in the process
 * that then execs.
 *
 * Return: 0 or a negative errno.
 */
int cli_sandbox_enter(const struct netns_sandbox *sb, struct sl_err *err)
{
	char resolv[512];
	int fd, r;

	fd = netns_ns_open(sb->name);
	if (fd == -EINVAL) /* netns_ns_open(): not a namespace's file */
		return sl_err_set(err, fd, "cannot open %s/%s: not a network namespace",
				  NETNS_RUN_DIR, sb->name);
	if (fd < 0)
		return sl_err_sys(err, fd, "cannot open %s/%s", NETNS_RUN_DIR, sb->name);
	r = setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return sl_err_sys(err, r, "cannot enter the sandbox's namespace");
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return sl_err_sys(err, errno, "cannot make a private mount namespace");
	netns_path(resolv, sizeof(resolv), NETNS_ETC_DIR, sb->name, "resolv.conf");
	/* Names still resolve without it (DNS to any server is the broker's),
	 * if less conveniently: say so and go on, as `ip netns exec` does. */
	if (mount(resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0)
		fprintf(stderr, "sluice: warning: cannot bind %s over /etc/resolv.conf: %s\n",
			resolv, strerror(errno));
	/* A sysfs mount shows the links of the namespace that mounted it. Not
	 * essential: a program that reads /sys/class/net merely sees the
	 * broker's links otherwise (names only; it cannot use them). */
	if (umount2("/sys", MNT_DETACH) == 0)
		mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
	return 0;
}

static void put_env(const char *key, const char *value, void *arg)
{
	int *r = arg;

	if (setenv(key, value, 1) < 0 && *r == 0)
		*r = -errno;
}

static void print_env(const char *key, const char *value, void *arg)
{
	fprintf(arg, "%s=%s\n", key, value);
}

/* The record of @name; prints why not. */
static int load(const char *name, struct netns_sandbox *sb)
{
	struct sl_err err = { 0 };
	int r;

	if (!netns_name_ok(name)) {
		fprintf(stderr, "sluice: no such sandbox `%s`\n", name);
		return -ENOENT;
	}
	r = netns_state_read(name, sb, &err);
	if (r == -ENOENT)
		fprintf(stderr, "sluice: no such sandbox `%s`\n", name);
	else if (r < 0)
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&err));
	return r;
}

/* --privileged: today's root command in the sandbox's network namespace,
 * with the host's files and processes. Enters @sb, sets its environment and
 * execs @argv; returns only on failure, with the exit status a shell would
 * give. */
static int enter_and_exec(const struct netns_sandbox *sb, char **argv)
{
	struct sl_err e = { 0 };
	int r;

	fprintf(stderr,
		"sluice: warning: --privileged: `%s` runs as root with the host's files and "
		"processes, only its network is the sandbox `%s`'s\n",
		argv[0], sb->name);
	/* Audited by the broker before anything runs; no record, no run. */
	r = netns_note_privileged(sb, &e);
	if (r < 0) {
		fprintf(stderr,
			"sluice: --privileged: the broker did not record the run, so it "
			"does not start: %s\n",
			sl_err_msg(&e));
		return 1;
	}
	/* The environment first: its placeholders come from the broker, whose
	 * control socket answers no caller inside a sandbox's namespace. */
	r = 0;
	if (netns_env_each(sb, put_env, &r) < 0)
		return 1; /* said why */
	if (r < 0) {
		fprintf(stderr, "sluice: cannot set the environment: %s\n", strerror(-r));
		return 1;
	}
	r = cli_sandbox_enter(sb, &e);
	if (r < 0) {
		fprintf(stderr, "sluice: %s\n", sl_err_msg(&e));
		return 1;
	}
	execvp(argv[0], argv);
	r = errno;
	fprintf(stderr, "sluice: %s: %s\n", argv[0], strerror(r));
	return r == ENOENT ? 127 : 126;
}

int cmd_env(int argc, char **argv)
{
	struct netns_sandbox sb;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	int r;

	if (argc != 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: sluice env NAME\n");
		return 2;
	}
	if (load(argv[1], &sb) < 0)
		return 1;
	/* All or nothing: a script that reads this must not get an
	 * environment without its placeholders. */
	out = open_memstream(&buf, &len);
	if (!out) {
		fprintf(stderr, "sluice: %s\n", strerror(errno));
		return 1;
	}
	r = netns_env_each(&sb, print_env, out);
	if (fclose(out) != 0 && r == 0)
		r = -ENOMEM;
	if (r == 0)
		fwrite(buf, 1, len, stdout);
	free(buf);
	return r < 0 ? 1 : 0;
}

/* The child that sluice waits for: the sandbox's init (runner.c), which
 * passes a signal on to the command. */
static volatile pid_t run_child;

/*
 * Forwards a signal sent to sluice to the command. A signal from the
 * terminal (si_code SI_KERNEL) went to the whole foreground process group,
 * the command included: sending it again would deliver it twice.
 */
static void forward(int sig, siginfo_t *si, void *ctx)
{
	int e = errno;

	(void)ctx;
	if (si->si_code != SI_KERNEL && run_child > 0)
		kill(run_child, sig);
	errno = e;
}

static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };

/*
 * Runs @argv in @sb as @o says (contained: runner.c) and waits for it,
 * passing on SIGINT, SIGTERM, SIGHUP and SIGQUIT (see forward()). @old: the
 * signal mask to restore; the caller holds those signals
 * (netns_hold_signals()), so that none is lost before the handlers are in
 * place. Returns the command's wait status, with the handlers removed and
 * the signals held again.
 */
static int spawn_wait(const struct netns_sandbox *sb, struct cli_runner *o, char **argv,
		      sigset_t *old)
{
	struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	int status = 1 << 8;
	pid_t pid;
	size_t k;

	if (o->privileged) {
		/* `run --privileged`: the command itself, as before. */
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			sigprocmask(SIG_SETMASK, old, NULL);
			_exit(enter_and_exec(sb, argv));
		}
		pid = pid < 0 ? -errno : pid;
	} else {
		if (cli_runner_prepare(sb, o) < 0)
			return status;
		pid = cli_runner_spawn(sb, o, argv, old);
	}
	if (pid < 0) {
		fprintf(stderr, "sluice: cannot start the sandbox's processes: %s\n",
			strerror(-pid));
		return status;
	}
	run_child = pid;
	sigemptyset(&sa.sa_mask);
	for (k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
		sigaction(forwarded[k], &sa, NULL);
	sigprocmask(SIG_SETMASK, old, NULL);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			status = 1 << 8;
			break;
		}
	}
	netns_hold_signals(old);
	run_child = 0;
	for (k = 0; k < sizeof(forwarded) / sizeof(forwarded[0]); k++)
		sigaction(forwarded[k], &dfl, NULL);
	return status;
}

static int exit_status(int status)
{
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

#define RUNNER_USAGE "[--user UID[:GID]] [--bind SRC:DST[:ro]]... [--privileged]"

int cmd_exec(int argc, char **argv)
{
	static struct cli_runner o;
	struct netns_sandbox sb;
	const char *name = NULL;
	sigset_t old;
	int i, r, status;

	/* Options before the command: before or after NAME, up to "--" or
	 * the first other word after NAME. */
	for (i = 1; i < argc; i++) {
		r = cli_runner_option(&o, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--")) {
			i++;
			break;
		}
		if (name)
			break;
		if (argv[i][0] == '-')
			goto usage;
		name = argv[i];
	}
	if (!name || i >= argc)
		goto usage;
	if (o.privileged && (o.user_set || o.nbinds)) {
		fprintf(stderr, "sluice: --user and --bind have no meaning with --privileged\n");
		return 2;
	}
	if (load(name, &sb) < 0)
		return 1;
	/* --privileged: sluice becomes the command, as before. Contained:
	 * sluice stays, as the parent that passes signals on. */
	if (o.privileged)
		return enter_and_exec(&sb, argv + i);
	netns_hold_signals(&old);
	status = spawn_wait(&sb, &o, argv + i, &old);
	return exit_status(status);
usage:
	fprintf(stderr, "usage: sluice exec " RUNNER_USAGE " NAME [--] CMD [ARG...]\n");
	return 2;
}

int cmd_run(int argc, char **argv)
{
	static struct cli_runner o;
	const char *policy = NULL, *name = NULL;
	char defname[40];
	struct netns_sandbox sb;
	struct sl_err e = { 0 };
	sigset_t old;
	bool audit = false;
	int i, status, r;

	for (i = 1; i < argc; i++) {
		r = cli_runner_option(&o, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--policy") && i + 1 < argc)
			policy = argv[++i];
		else if (!strcmp(argv[i], "--audit"))
			audit = true;
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[++i];
		else if (!strcmp(argv[i], "--"))
			break;
		else
			goto usage;
	}
	if (!policy || i + 1 >= argc)
		goto usage;
	if (o.privileged && (o.user_set || o.nbinds)) {
		fprintf(stderr, "sluice: --user and --bind have no meaning with --privileged\n");
		return 2;
	}
	if (!name) {
		snprintf(defname, sizeof(defname), "sluice-run-%d", (int)getpid());
		name = defname;
	}
	/* Held from before create until the handlers are in place: a signal
	 * meanwhile waits, then reaches the command (or ends a create that has
	 * been undone). */
	netns_hold_signals(&old);
	r = netns_sandbox_create(name, policy, audit, &sb, &e);
	if (r < 0) {
		sigprocmask(SIG_SETMASK, &old, NULL);
		/* A policy error is whole: FILE:LINE:COL: message. */
		if (sl_err_errno(&e) == EBADMSG)
			fprintf(stderr, "%s\n", sl_err_msg(&e));
		else
			fprintf(stderr, "sluice: create `%s`: %s\n", name, sl_err_msg(&e));
		return 1;
	}
	status = spawn_wait(&sb, &o, argv + i + 1, &old);
	r = netns_sandbox_delete(sb.name, &e);
	if (r < 0)
		fprintf(stderr, "sluice: delete `%s`: %s\n", sb.name, sl_err_msg(&e));
	return exit_status(status);
usage:
	fprintf(stderr, "usage: sluice run --policy FILE [--audit] [--name NAME] " RUNNER_USAGE
			" -- CMD [ARG...]\n");
	return 2;
}
