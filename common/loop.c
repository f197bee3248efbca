// SPDX-License-Identifier: MIT
/* Per-thread epoll event loop: fd events, heap timers, cross-thread posts.
 *
 * Theory of operation
 *
 * Each broker worker thread owns one loop. Everything that touches a loop's
 * evs and timers runs on that thread; the only entry points for other
 * threads are loop_stop() and loop_post(), which go through an eventfd that
 * the loop watches like any other fd.
 *
 * One iteration: read the clock (cached for the iteration), stop if asked,
 * fire expired timers, epoll_wait() up to the next deadline for a batch of
 * at most LOOP_BATCH events, read the clock again, dispatch the batch.
 *
 * A timer fires only once the loop has looked at its fds after the timer's
 * deadline. If a callback held the loop up (a blocking call on the main
 * loop, a starved CPU) and a deadline passed meanwhile, bytes may have come
 * in time and still sit unread: a timeout fired now would refuse a peer
 * that was not late. So the timers due by the last look fire first; if more
 * fell due since, the loop takes what is ready (epoll_wait() without
 * waiting, a few batches at most) before it fires them.
 *
 * Deleted evs: epoll hands back data.ptr values, so an ev freed by an
 * earlier callback of the same batch would be a dangling pointer. While a
 * batch is dispatched, loop_del() clears every later batch slot that holds
 * the deleted ev, so the loop never dereferences it again; owners may free
 * an ev as soon as loop_del() returns. (A new ev allocated at the same
 * address and added in the same batch is safe too: its slots were cleared
 * before it existed, and its own events come in a later batch.)
 *
 * Timers: a binary min-heap of struct timer pointers ordered by (deadline,
 * arming sequence), each timer storing its slot so cancel and re-arm are
 * O(log n) without searching: 100k armed per-connection timeouts cost one
 * pointer each. An expiry pass fires only timers armed before the pass
 * began, so a callback that re-arms with 0 ms cannot starve the loop.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/loop.h"
#include "common/log.h"

#define LOOP_BATCH 256
#define LOOP_HEAP_MIN 64

struct loop_post {
	struct loop_post *next;
	void (*fn)(void *arg);
	void *arg;
};

struct loop {
	int epfd;
	struct ev wake; /* eventfd written by loop_stop()/loop_post() */
	atomic_bool stop;
	bool running;
	uint64_t now;
	uint64_t looked; /* clock when epoll_wait() last returned */

	struct timer **heap;
	size_t heap_len;
	size_t heap_cap;
	uint64_t seq;

	/* The batch being dispatched; slots after batch_pos are pending. */
	struct epoll_event batch[LOOP_BATCH];
	int batch_n;
	int batch_pos;
	uint64_t batches; /* batches epoll_wait() returned (loop_batch_seq()) */

	void (*idle)(void); /* loop_set_idle() */

	pthread_mutex_t post_lock;
	struct loop_post *post_head;
	struct loop_post **post_tail;
};

static uint64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* --- timer heap ----------------------------------------------------------- */

static bool timer_before(const struct timer *a, const struct timer *b)
{
	if (a->expires != b->expires)
		return a->expires < b->expires;
	return a->seq < b->seq;
}

static void heap_set(struct loop *l, size_t i, struct timer *t)
{
	l->heap[i] = t;
	t->heap_idx = i + 1;
}

static void heap_up(struct loop *l, size_t i)
{
	struct timer *t = l->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (!timer_before(t, l->heap[parent]))
			break;
		heap_set(l, i, l->heap[parent]);
		i = parent;
	}
	heap_set(l, i, t);
}

static void heap_down(struct loop *l, size_t i)
{
	struct timer *t = l->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= l->heap_len)
			break;
		if (c + 1 < l->heap_len && timer_before(l->heap[c + 1], l->heap[c]))
			c++;
		if (!timer_before(l->heap[c], t))
			break;
		heap_set(l, i, l->heap[c]);
		i = c;
	}
	heap_set(l, i, t);
}

/* Moves the timer at slot i to where its (changed) key belongs. */
static void heap_fix(struct loop *l, size_t i)
{
	if (i > 0 && timer_before(l->heap[i], l->heap[(i - 1) / 2]))
		heap_up(l, i);
	else
		heap_down(l, i);
}

static void heap_remove(struct loop *l, struct timer *t)
{
	size_t i = t->heap_idx - 1;
	struct timer *last = l->heap[--l->heap_len];

	t->heap_idx = 0;
	if (last != t) {
		heap_set(l, i, last);
		heap_fix(l, i);
	}
}

int loop_timer_arm(struct loop *l, struct timer *t, uint64_t ms_from_now)
{
	uint64_t now = loop_now_ms(l);

	/* Clamp so that now + delay cannot wrap (a "never" deadline). */
	if (ms_from_now > UINT64_MAX / 2)
		ms_from_now = UINT64_MAX / 2;
	t->expires = now + ms_from_now;
	t->seq = l->seq++;

	if (t->heap_idx) {
		heap_fix(l, t->heap_idx - 1);
		return 0;
	}
	if (l->heap_len == l->heap_cap) {
		size_t cap = l->heap_cap ? l->heap_cap * 2 : LOOP_HEAP_MIN;
		struct timer **h = reallocarray(l->heap, cap, sizeof(*h));

		if (!h)
			return -ENOMEM;
		l->heap = h;
		l->heap_cap = cap;
	}
	l->heap[l->heap_len] = t;
	l->heap_len++;
	heap_up(l, l->heap_len - 1);
	return 0;
}

void loop_timer_cancel(struct loop *l, struct timer *t)
{
	if (t->heap_idx)
		heap_remove(l, t);
}

/* Fires timers due by @due_by and armed before @limit (the theory of operation). */
static void run_timers(struct loop *l, uint64_t due_by, uint64_t limit)
{
	while (l->heap_len) {
		struct timer *t = l->heap[0];

		if (t->expires > due_by || t->seq >= limit)
			break;
		heap_remove(l, t);
		t->cb(t);
	}
}

static int next_timeout(struct loop *l)
{
	uint64_t now, when;

	if (!l->heap_len)
		return -1;
	when = l->heap[0]->expires;
	now = clock_ms();
	if (when <= now)
		return 0;
	/* An early wake-up (ms truncation) only costs one more iteration. */
	return when - now > INT_MAX ? INT_MAX : (int)(when - now);
}

uint64_t loop_now_ms(struct loop *l)
{
	return l->running ? l->now : clock_ms();
}

/* --- fd events ------------------------------------------------------------ */

static int ctl(struct loop *l, int op, struct ev *ev, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.ptr = ev };

	if (epoll_ctl(l->epfd, op, ev->fd, &e) < 0)
		return -errno;
	return 0;
}

int loop_add(struct loop *l, struct ev *ev, uint32_t events)
{
	return ctl(l, EPOLL_CTL_ADD, ev, events);
}

int loop_mod(struct loop *l, struct ev *ev, uint32_t events)
{
	return ctl(l, EPOLL_CTL_MOD, ev, events);
}

int loop_del(struct loop *l, struct ev *ev)
{
	int i;

	for (i = l->batch_pos + 1; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == ev)
			l->batch[i].data.ptr = NULL;
	return ctl(l, EPOLL_CTL_DEL, ev, 0);
}

uint64_t loop_batch_seq(const struct loop *l)
{
	return l->batches;
}

bool loop_unreported_since(const struct loop *l, const struct ev *ev, uint64_t seq)
{
	int i;

	if (l->batches <= seq || l->batch_n >= LOOP_BATCH)
		return false;
	for (i = 0; i < l->batch_n; i++)
		if (l->batch[i].data.ptr == ev)
			return false;
	return true;
}

/* --- cross-thread wake-ups ------------------------------------------------ */

static void wake_write(struct loop *l)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the loop is woken anyway. */
	if (write(l->wake.fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_err("loop: eventfd write: %s", strerror(errno));
}

static void run_posts(struct loop *l)
{
	struct loop_post *p, *next;

	/* Take the whole queue, then run it unlocked: a posted function may
	 * post again (that one runs on a later iteration). */
	pthread_mutex_lock(&l->post_lock);
	p = l->post_head;
	l->post_head = NULL;
	l->post_tail = &l->post_head;
	pthread_mutex_unlock(&l->post_lock);

	for (; p; p = next) {
		next = p->next;
		p->fn(p->arg);
		free(p);
	}
}

static void wake_cb(struct ev *ev, uint32_t events)
{
	struct loop *l = container_of(ev, struct loop, wake);
	uint64_t v;

	(void)events;
	if (read(ev->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_err("loop: eventfd read: %s", strerror(errno));
	run_posts(l);
}

int loop_post(struct loop *l, void (*fn)(void *), void *arg)
{
	struct loop_post *p = malloc(sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->next = NULL;
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&l->post_lock);
	*l->post_tail = p;
	l->post_tail = &p->next;
	pthread_mutex_unlock(&l->post_lock);
	wake_write(l);
	return 0;
}

void loop_stop(struct loop *l)
{
	atomic_store(&l->stop, true);
	wake_write(l);
}

/* --- life cycle ----------------------------------------------------------- */

struct loop *loop_new(void)
{
	struct loop *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return NULL;
	l->epfd = -1;
	l->wake.fd = -1;
	l->post_tail = &l->post_head;
	atomic_init(&l->stop, false);
	pthread_mutex_init(&l->post_lock, NULL);

	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		goto fail;
	l->wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (l->wake.fd < 0)
		goto fail;
	l->wake.cb = wake_cb;
	err = loop_add(l, &l->wake, EPOLLIN);
	if (err) {
		errno = -err;
		goto fail;
	}
	l->now = clock_ms();
	return l;
fail:
	err = errno;
	loop_free(l);
	errno = err;
	return NULL;
}

void loop_free(struct loop *l)
{
	struct loop_post *p, *next;

	if (!l)
		return;
	for (p = l->post_head; p; p = next) {
		next = p->next;
		free(p);
	}
	if (l->wake.fd >= 0)
		close(l->wake.fd);
	if (l->epfd >= 0)
		close(l->epfd);
	free(l->heap);
	pthread_mutex_destroy(&l->post_lock);
	free(l);
}

/* Dispatches the n events epoll_wait() just returned (the theory of operation). */
static void dispatch(struct loop *l, int n)
{
	l->now = clock_ms();
	l->looked = l->now;
	l->batch_n = n;
	l->batches++;
	for (l->batch_pos = 0; l->batch_pos < n; l->batch_pos++) {
		struct epoll_event *e = &l->batch[l->batch_pos];
		struct ev *ev = e->data.ptr;

		if (ev)
			ev->cb(ev, e->events);
	}
	l->batch_n = 0;
	l->batch_pos = 0;
}

/* Batches taken before timers that fell due while the loop was held up. */
#define CATCH_UP_BATCHES 4

/*
 * Fires the timers that are due, those that fell due since the loop last
 * looked at its fds only after it has taken what is ready now.
 */
static int fire_timers(struct loop *l)
{
	uint64_t limit = l->seq;
	int i;

	run_timers(l, l->looked, limit);
	/* The first due timer (by deadline, then arming) tells: one armed in
	 * the pass just run (a 0 ms re-arm, a yield) waits for the next
	 * iteration anyway, and needs no look now. */
	if (!l->heap_len || l->heap[0]->expires > l->now || l->heap[0]->seq >= limit)
		return 0;
	for (i = 0; i < CATCH_UP_BATCHES; i++) {
		int n = epoll_wait(l->epfd, l->batch, LOOP_BATCH, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n < 0)
			continue;
		dispatch(l, n);
		if (n < LOOP_BATCH)
			break;
	}
	run_timers(l, l->looked, limit);
	return 0;
}

int loop_run(struct loop *l)
{
	int ret = 0;

	l->running = true;
	l->looked = clock_ms();
	for (;;) {
		int n, timeout;

		l->now = clock_ms();
		if (atomic_exchange(&l->stop, false))
			break;
		ret = fire_timers(l);
		if (ret < 0) {
			log_err("loop: epoll_wait: %s", strerror(-ret));
			break;
		}
		timeout = next_timeout(l);
		if (l->idle)
			l->idle();

		n = epoll_wait(l->epfd, l->batch, LOOP_BATCH, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			log_err("loop: epoll_wait: %s", strerror(errno));
			break;
		}
		dispatch(l, n);
	}
	l->running = false;
	if (l->idle)
		l->idle();
	return ret;
}

void loop_set_idle(struct loop *l, void (*fn)(void))
{
	l->idle = fn;
}
