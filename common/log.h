/* SPDX-License-Identifier: MIT */
/* Logging to stderr with a level and a subsystem prefix; never give it a secret. */
#ifndef SLUICE_COMMON_LOG_H
#define SLUICE_COMMON_LOG_H

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

extern enum log_level log_threshold;

void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
