/* SPDX-License-Identifier: MIT */
/* Per-thread epoll event loop: fd events, heap timers, cross-thread posts. */
#ifndef SLUICE_COMMON_LOOP_H
#define SLUICE_COMMON_LOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef container_of
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))
#endif

struct loop;

/**
 * struct ev - an fd registration, embedded in its owner's struct
 * @fd: the file descriptor; set by the owner before loop_add()
 * @cb: called on the loop thread with the epoll event bits (EPOLLIN, ...)
 *
 * Lifetime rule: an owner calls loop_del() before it closes @fd or frees the
 * struct that holds the ev. After loop_del() returns, the loop never touches
 * the ev again, not even for events of it still pending in the batch being
 * dispatched; so loop_del() then free() is safe from any callback, including
 * the ev's own.
 */
struct ev {
	int fd;
	void (*cb)(struct ev *ev, uint32_t events);
};

/**
 * struct timer - a one-shot timer, embedded in its owner's struct
 * @cb:       called on the loop thread when the timer expires; the timer is
 *            already disarmed then, so the callback may re-arm it, cancel
 *            others, or cancel-and-free the object that owns it
 * @expires:  private (absolute deadline, loop_now_ms() units)
 * @seq:      private (arming order; ties fire in the order they were armed)
 * @heap_idx: private (1-based slot in the loop's heap; 0 = not armed)
 *
 * A zero-filled timer is a valid unarmed timer.
 */
struct timer {
	void (*cb)(struct timer *t);
	uint64_t expires;
	uint64_t seq;
	size_t heap_idx;
};

/**
 * loop_new() - create an event loop (epoll instance plus a wake eventfd)
 *
 * Return: the loop, or NULL with errno set.
 */
struct loop *loop_new(void);

/**
 * loop_free() - destroy a loop that is not running
 * @l: the loop, or NULL
 *
 * Registered evs and armed timers are forgotten, not called. Functions still
 * queued by loop_post() are dropped without being called: whoever posted
 * them owns their argument.
 */
void loop_free(struct loop *l);

/**
 * loop_add() - watch @ev->fd for @events (EPOLLIN, EPOLLOUT, EPOLLET, ...)
 * @l:      the loop
 * @ev:     the registration; its memory must stay valid until loop_del()
 * @events: epoll event mask
 *
 * Return: 0 or a negative errno from epoll_ctl.
 */
int loop_add(struct loop *l, struct ev *ev, uint32_t events);

/**
 * loop_mod() - change the events watched for @ev
 * @l:      the loop
 * @ev:     a registered ev
 * @events: new epoll event mask
 *
 * Return: 0 or a negative errno.
 */
int loop_mod(struct loop *l, struct ev *ev, uint32_t events);

/**
 * loop_del() - stop watching @ev; the loop forgets it at once
 * @l:  the loop
 * @ev: a registered ev; call before closing its fd
 *
 * Events of @ev that epoll already returned in the batch now being
 * dispatched are dropped, so the owner may free @ev as soon as this returns.
 *
 * Return: 0 or a negative errno from epoll_ctl (the ev is forgotten anyway).
 */
int loop_del(struct loop *l, struct ev *ev);

/**
 * loop_batch_seq() - how many batches epoll_wait() has returned so far
 * @l: the loop
 *
 * Loop thread only. A mark to pass to loop_unreported_since() later.
 */
uint64_t loop_batch_seq(const struct loop *l);

/**
 * loop_unreported_since() - did the loop's last look find nothing for @ev?
 * @l:   the loop
 * @ev:  a registered ev, watched level-triggered
 * @seq: loop_batch_seq() when the caller last knew @ev to have nothing
 *       (e.g. a socket just read to its end)
 *
 * True when epoll_wait() has returned since @seq and its last batch (the one
 * being dispatched, or the last one) holds no event for @ev, dispatched or
 * still pending, and was not cut short by the batch size: the interest @ev
 * was watched for had not arisen when epoll last looked. What came after that
 * look is not seen. Loop thread only.
 */
bool loop_unreported_since(const struct loop *l, const struct ev *ev, uint64_t seq);

/**
 * loop_timer_arm() - (re-)arm @t to fire @ms_from_now milliseconds from now
 * @l:           the loop
 * @t:           the timer; @t->cb must be set; may already be armed
 * @ms_from_now: delay; 0 fires on the next loop iteration, never inline
 *
 * "Now" is loop_now_ms(). Timers with equal deadlines fire in arming order.
 * Timers armed by a timer callback never fire in the same expiry pass.
 *
 * Return: 0, or -ENOMEM if the heap could not grow (the timer stays
 * unarmed). Never fails for a timer that is armed (it moves in place), nor
 * for a timer that its own callback re-arms before arming any other timer
 * (its heap slot was just freed): a module can hold one slot for good.
 */
int loop_timer_arm(struct loop *l, struct timer *t, uint64_t ms_from_now);

/**
 * loop_timer_cancel() - disarm @t; a no-op on an unarmed timer
 * @l: the loop
 * @t: the timer
 *
 * Safe from any callback. Afterwards the loop keeps no reference to @t.
 */
void loop_timer_cancel(struct loop *l, struct timer *t);

/* True while @t is armed. */
static inline bool loop_timer_armed(const struct timer *t)
{
	return t->heap_idx != 0;
}

/**
 * loop_now_ms() - CLOCK_MONOTONIC in milliseconds
 * @l: the loop
 *
 * Inside loop_run() this is read once per wake-up and cached, so every
 * callback of one iteration sees the same time; outside loop_run() it reads
 * the clock. Loop thread only.
 *
 * Return: milliseconds since an arbitrary start.
 */
uint64_t loop_now_ms(struct loop *l);

/**
 * loop_run() - dispatch events and timers until loop_stop()
 * @l: the loop
 *
 * A loop_stop() that arrives before loop_run() makes it return at once;
 * each loop_stop() ends one loop_run(). Not re-entrant: never call it from
 * a callback of the same loop.
 *
 * Return: 0 when stopped, or a negative errno if epoll_wait failed.
 */
int loop_run(struct loop *l);

/**
 * loop_stop() - make loop_run() return after the current batch
 * @l: the loop
 *
 * Callable from any thread, and from a signal handler: it takes no lock,
 * only stores an atomic flag and writes to an eventfd.
 */
void loop_stop(struct loop *l);

/**
 * loop_set_idle() - call @fn each time the loop is about to wait
 * @l: the loop
 * @fn: called before each epoll_wait() and once when the loop ends (the
 *      audit log's batch, audit_flush()); NULL for none
 *
 * Call it before loop_run(), from the thread that runs the loop.
 */
void loop_set_idle(struct loop *l, void (*fn)(void));

/**
 * loop_post() - run @fn(@arg) on the loop thread, soon
 * @l:   the loop
 * @fn:  the function
 * @arg: its argument
 *
 * Callable from any thread, including the loop thread (then @fn runs on a
 * later iteration, never inline). Posted functions run in the order posted.
 * The loop does not know what @arg is: the poster owns its lifetime and
 * must keep it valid until @fn runs (e.g. hold a reference that @fn drops,
 * or pass an id that @fn looks up). If the loop is freed first, @fn is
 * dropped uncalled.
 *
 * Return: 0, or -ENOMEM.
 */
int loop_post(struct loop *l, void (*fn)(void *), void *arg);

#endif
