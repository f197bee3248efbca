// SPDX-License-Identifier: MIT
/*
 * timed - runs one command as a caller pays for it, and says how long.
 *
 *   timed OUT SECONDS CMD [ARG...]
 *
 * Forks, execs CMD (found as execvp() finds it), waits for it, and
 * appends "STATUS MICROSECONDS\n" to the file OUT: the wall time from
 * just before the fork to just after the wait, on CLOCK_MONOTONIC, and
 * the command's exit status (128 + the signal's number when a signal
 * ended it). A command still running after SECONDS is killed (SIGKILL to
 * it alone, by the PID this process got from fork()), and counts as
 * failed (status 124, as timeout(1) says).
 *
 * Why not `timeout SECONDS CMD` timed from the shell: timeout is a
 * process of its own, forked and execed around each command (about
 * 1.5 ms on the machine this was written on), which no caller of sluice
 * pays; and a shell that reads the clock through a command substitution
 * counts a fork of itself too. This process's own start and the write
 * of the result are outside what is counted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pid_t child;

static void on_alarm(int sig)
{
	(void)sig;
	if (child > 0)
		kill(child, SIGKILL);
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int main(int argc, char **argv)
{
	struct sigaction sa;
	long long t0, t1;
	int st, rc, secs;
	char *end;
	FILE *out;

	if (argc < 4) {
		fprintf(stderr, "usage: timed OUT SECONDS CMD [ARG...]\n");
		return 2;
	}
	secs = (int)strtol(argv[2], &end, 10);
	if (*end || secs < 1 || secs > 3600) {
		fprintf(stderr, "timed: SECONDS must be 1..3600\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	t0 = now_us();
	child = fork();
	if (child < 0) {
		perror("timed: fork");
		return 2;
	}
	if (child == 0) {
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	alarm((unsigned)secs);
	while (waitpid(child, &st, 0) < 0) {
		if (errno != EINTR) {
			perror("timed: waitpid");
			return 2;
		}
	}
	t1 = now_us();
	alarm(0);
	if (WIFSIGNALED(st))
		rc = WTERMSIG(st) == SIGKILL ? 124 : 128 + WTERMSIG(st);
	else
		rc = WEXITSTATUS(st);
	out = fopen(argv[1], "a");
	if (!out) {
		perror("timed: OUT");
		return 2;
	}
	fprintf(out, "%d %lld\n", rc, t1 - t0);
	return fclose(out) == 0 ? rc : 2;
}
