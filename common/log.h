/* SPDX-License-Identifier: MIT */
/* Logging to stderr with a level and a subsystem prefix; never give it a secret. */
#ifndef SLUICE_COMMON_LOG_H
#define SLUICE_COMMON_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_LVL_ERR, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG };

extern enum log_level log_threshold;

void log_msg(enum log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True once stderr failed for good (its reader gone): lines are then only
 * counted. */
bool log_stderr_dead(void);
/* Lines not written (stderr dead, or a failed or short write) since start. */
uint64_t log_lines_lost(void);

__attribute__((noreturn, format(printf, 1, 2))) void die(const char *fmt, ...);

/**
 * struct log_every - lets a warning that can repeat fast through at most
 * once per interval, from any thread; zero-filled is ready to use
 * @next_ms: private: when the next line may go out
 * @held:    private: lines held back since the last one let through
 */
struct log_every {
	atomic_uint_fast64_t next_ms;
	atomic_uint_fast64_t held;
};

/**
 * log_every_ok() - may the caller log now?
 * @le:       the warning's state
 * @now_ms:   a monotonic clock in milliseconds
 * @every_ms: the interval
 * @held:     set, when true is returned, to the lines held back before this one
 *
 * Return: true for the first call and then for at most one call per
 * @every_ms; false (the line is counted as held back) otherwise.
 */
bool log_every_ok(struct log_every *le, uint64_t now_ms, uint64_t every_ms, uint64_t *held);

#define log_err(...) log_msg(LOG_LVL_ERR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __VA_ARGS__)

#endif
