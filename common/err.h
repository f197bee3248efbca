/* SPDX-License-Identifier: MIT */
/* One error type: an errno, a message a user can read, and where it was set.
 *
 * A function that can fail for a reason its caller should show takes a
 * `struct sl_err *err` (NULL when the caller does not care) and returns 0
 * or a negative errno, as before: the error never replaces the return
 * value, it says what the return value cannot. The innermost failure sets
 * it (sl_err_set(), sl_err_sys()); each layer above that knows more adds
 * its context in front (sl_err_wrap()). The location is the innermost
 * one's: it is where the thing happened, for a developer's eyes (the
 * message is the user's and never shows it).
 *
 * The message is a fixed buffer: an error needs no allocation (it is set
 * where memory ran out too) and a too-long message is cut at a character
 * boundary, never overflowing. (crun's libcrun_error_t is the model, less
 * the heap.)
 */
#ifndef SLUICE_ERR_H
#define SLUICE_ERR_H

/* Room for a path, a policy or YAML error (512) and some context. */
#define SL_ERR_MSG_MAX 1024

struct sl_err {
	int errnum;	  /* positive errno; 0 when no system call failed */
	const char *file; /* where it was set (__FILE__), NULL when not set */
	const char *func;
	unsigned line;
	char msg[SL_ERR_MSG_MAX]; /* always NUL-terminated */
};

int sl_err_set_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));
int sl_err_sys_at(struct sl_err *err, const char *file, unsigned line, const char *func, int errnum,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/**
 * sl_err_set() - set @err: the message, @errnum, and this source position
 * @err:    the error, or NULL (then nothing is set)
 * @errnum: an errno, either sign (stored positive); 0 when the failure is
 *          not a system call's (a bad value, a refusal)
 *
 * The message replaces any earlier one.
 *
 * Return: -@errnum, or -EINVAL when @errnum is 0, so that a caller can
 * `return sl_err_set(err, ...)`.
 */
#define sl_err_set(err, errnum, ...) \
	sl_err_set_at((err), __FILE__, __LINE__, __func__, (errnum), __VA_ARGS__)

/* As sl_err_set(), with ": " and strerror(@errnum) after the message. */
#define sl_err_sys(err, errnum, ...) \
	sl_err_sys_at((err), __FILE__, __LINE__, __func__, (errnum), __VA_ARGS__)

/**
 * sl_err_wrap() - put context in front of the message
 * @err: the error, or NULL
 *
 * "permission denied" becomes "reading /x: permission denied" after
 * sl_err_wrap(err, "reading %s", "/x"). The errno and the location stay the
 * innermost ones. An error with no message gets the context alone.
 */
void sl_err_wrap(struct sl_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Back to "no error" (NULL accepted). */
void sl_err_clear(struct sl_err *err);

/* The message: "" for NULL or an error never set; never NULL. */
const char *sl_err_msg(const struct sl_err *err);

/* The errno kept (positive), 0 for NULL or none. */
int sl_err_errno(const struct sl_err *err);

#endif
