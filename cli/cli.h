/* SPDX-License-Identifier: MIT */
/* The subcommands of sluice's dispatch table (cli/main.c). cmd_report()
 * is auditlog.h's. */
#ifndef SLUICE_CLI_H
#define SLUICE_CLI_H

/* Each returns the process exit status: 0, 1 for a failure, 2 for misuse. */
int cmd_policy(int argc, char **argv);
/* cmd_sandbox.c: the netns/ library's create and delete, as subcommands. */
int cmd_create(int argc, char **argv);
int cmd_delete(int argc, char **argv);
/* cmd_ctl.c: the subcommands that only talk to the broker. */
int cmd_register(int argc, char **argv);
int cmd_unregister(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_reload(int argc, char **argv);
int cmd_update(int argc, char **argv);
int cmd_ca(int argc, char **argv);
/* hold.c: held requests. */
int cmd_pending(int argc, char **argv);
int cmd_approve(int argc, char **argv);
int cmd_refuse(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_detach(int argc, char **argv);
/* exec returns only on failure (1, or 126/127 as a shell); run returns the
 * command's status (128 + N for a signal N). */
int cmd_exec(int argc, char **argv);
int cmd_env(int argc, char **argv);
int cmd_run(int argc, char **argv);

#endif
