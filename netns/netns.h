/* SPDX-License-Identifier: MIT */
/* The sluice CLI's subcommands and the sandbox lifecycle. */
#ifndef SLUICE_NETNS_H
#define SLUICE_NETNS_H

/* The broker's control socket (--socket, SLUICE_SOCKET, or the default). */
extern const char *netns_socket_path;

/**
 * netns_ctl() - one request to sluiced over the control socket
 * @line: the request, without its newline
 * @resp: the answer's body, or the broker's error message (free() it)
 *
 * Return: 0; -EPROTO when the broker answered with an error; another
 * negative errno when it could not be reached.
 */
int netns_ctl(const char *line, char **resp);

/* Each returns the process exit status: 0, 1 for a failure, 2 for misuse. */
int cmd_policy(int argc, char **argv);
int cmd_register(int argc, char **argv);
int cmd_unregister(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_reload(int argc, char **argv);

#endif
