// SPDX-License-Identifier: MIT
/* Unit tests for the event loop (common/loop.c): timers, deleted evs, posts, stop. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/loop.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A bounded run: the watchdog stops the loop and marks the test failed. */
struct watchdog {
	struct timer t;
	struct loop *l;
	bool fired;
};

static void watchdog_cb(struct timer *t)
{
	struct watchdog *w = container_of(t, struct watchdog, t);

	w->fired = true;
	loop_stop(w->l);
}

/* Runs @l until someone calls loop_stop(); false if the watchdog did. */
static bool run_bounded(struct loop *l, uint64_t max_ms)
{
	struct watchdog w = { .t.cb = watchdog_cb, .l = l };

	assert_int_equal(loop_timer_arm(l, &w.t, max_ms), 0);
	assert_int_equal(loop_run(l), 0);
	loop_timer_cancel(l, &w.t);
	return !w.fired;
}

/* --- timers fire in deadline order, ties in arming order ------------------ */

struct otimer {
	struct timer t;
	int id;
	uint64_t delay;
	uint64_t armed_at;
};

static struct loop *order_loop;
static int order_seen[8];
static int order_n;
static bool order_late_ok = true;

static void order_cb(struct timer *t)
{
	struct otimer *o = container_of(t, struct otimer, t);

	if (loop_now_ms(order_loop) < o->armed_at + o->delay)
		order_late_ok = false; /* fired before its deadline */
	order_seen[order_n++] = o->id;
	if (order_n == 6)
		loop_stop(order_loop);
}

static void test_timers_fire_in_order(void **state)
{
	static const uint64_t delays[6] = { 30, 10, 20, 10, 0, 20 };
	static const int expect[6] = { 4, 1, 3, 2, 5, 0 };
	struct otimer ot[6];
	struct loop *l = loop_new();

	(void)state;
	assert_non_null(l);
	order_loop = l;
	order_n = 0;
	for (int i = 0; i < 6; i++) {
		ot[i] = (struct otimer){ .t.cb = order_cb, .id = i, .delay = delays[i] };
		ot[i].armed_at = loop_now_ms(l);
		assert_int_equal(loop_timer_arm(l, &ot[i].t, delays[i]), 0);
		assert_true(loop_timer_armed(&ot[i].t));
	}
	assert_true(run_bounded(l, 2000));
	assert_int_equal(order_n, 6);
	assert_memory_equal(order_seen, expect, sizeof(expect));
	assert_true(order_late_ok);
	for (int i = 0; i < 6; i++)
		assert_false(loop_timer_armed(&ot[i].t));
	loop_free(l);
}

/* --- cancel / re-arm / free from callbacks -------------------------------- */

struct owned {
	struct timer t;
	int *fired;
};

static struct {
	struct loop *l;
	struct timer a, b, c, stop;
	struct timer never_armed;
	struct owned *obj;
	int na, nb, nc, nobj;
} cc;

static void cc_a(struct timer *t)
{
	cc.na++;
	/* c has the same deadline and was armed later: it is due in this
	 * very pass, and must still not fire once cancelled. */
	loop_timer_cancel(cc.l, &cc.c);
	loop_timer_cancel(cc.l, &cc.b);
	loop_timer_cancel(cc.l, &cc.never_armed);
	if (cc.na == 1)
		assert_int_equal(loop_timer_arm(cc.l, t, 5), 0);
}

static void cc_b(struct timer *t)
{
	(void)t;
	cc.nb++;
}

static void cc_c(struct timer *t)
{
	(void)t;
	cc.nc++;
}

static void cc_obj(struct timer *t)
{
	struct owned *o = container_of(t, struct owned, t);

	(*o->fired)++;
	loop_timer_cancel(cc.l, t); /* already disarmed: a no-op */
	free(o);		    /* the loop must not touch it again */
	cc.obj = NULL;
}

static void cc_stop(struct timer *t)
{
	(void)t;
	loop_stop(cc.l);
}

static void test_timer_cancel_from_callback(void **state)
{
	struct loop *l = loop_new();

	(void)state;
	assert_non_null(l);
	memset(&cc, 0, sizeof(cc));
	cc.l = l;
	cc.a.cb = cc_a;
	cc.b.cb = cc_b;
	cc.c.cb = cc_c;
	cc.stop.cb = cc_stop;
	cc.never_armed.cb = cc_b;
	loop_timer_cancel(l, &cc.never_armed); /* zero-filled: safe */

	cc.obj = calloc(1, sizeof(*cc.obj));
	assert_non_null(cc.obj);
	cc.obj->t.cb = cc_obj;
	cc.obj->fired = &cc.nobj;

	assert_int_equal(loop_timer_arm(l, &cc.a, 10), 0);
	assert_int_equal(loop_timer_arm(l, &cc.c, 10), 0);
	assert_int_equal(loop_timer_arm(l, &cc.b, 40), 0);
	assert_int_equal(loop_timer_arm(l, &cc.obj->t, 15), 0);
	assert_int_equal(loop_timer_arm(l, &cc.stop, 80), 0);
	/* Re-arming an armed timer moves it (b: 40 -> 20 ms). */
	assert_int_equal(loop_timer_arm(l, &cc.b, 20), 0);

	assert_true(run_bounded(l, 2000));
	assert_int_equal(cc.na, 2); /* fired, re-armed itself, fired again */
	assert_int_equal(cc.nb, 0);
	assert_int_equal(cc.nc, 0);
	assert_int_equal(cc.nobj, 1);
	assert_null(cc.obj);
	assert_false(loop_timer_armed(&cc.b));
	loop_free(l);
}

/* A 0 ms timer that re-arms itself runs once per iteration, never in a spin
 * inside one expiry pass: an fd event still gets through. */
static struct {
	struct loop *l;
	struct timer t;
	struct ev ev;
	int ticks;
	int ticks_at_event;
} spin;

static void spin_tick(struct timer *t)
{
	spin.ticks++;
	assert_int_equal(loop_timer_arm(spin.l, t, 0), 0);
}

static void spin_event(struct ev *ev, uint32_t events)
{
	uint64_t v;

	(void)events;
	assert_int_equal(read(ev->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	spin.ticks_at_event = spin.ticks;
	loop_stop(spin.l);
}

static void test_zero_timer_does_not_starve(void **state)
{
	uint64_t one = 1;

	(void)state;
	memset(&spin, 0, sizeof(spin));
	spin.l = loop_new();
	assert_non_null(spin.l);
	spin.t.cb = spin_tick;
	spin.ev.cb = spin_event;
	spin.ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(spin.ev.fd >= 0);
	assert_int_equal(loop_add(spin.l, &spin.ev, EPOLLIN), 0);
	assert_int_equal(write(spin.ev.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	assert_int_equal(loop_timer_arm(spin.l, &spin.t, 0), 0);
	assert_true(run_bounded(spin.l, 2000));
	/* First iteration: one tick, then the batch with the event. */
	assert_int_equal(spin.ticks_at_event, 1);
	loop_timer_cancel(spin.l, &spin.t);
	assert_int_equal(loop_del(spin.l, &spin.ev), 0);
	close(spin.ev.fd);
	loop_free(spin.l);
}

/* --- 100k timers ---------------------------------------------------------- */

#define MANY 100000

struct mtimer {
	struct timer t;
	int fired;
	bool cancelled;
};

static struct {
	struct loop *l;
	struct mtimer *tm;
	int expect;
	int fired;
	uint64_t last_expires;
	bool order_ok;
	bool late_ok;
} many;

static void many_cb(struct timer *t)
{
	struct mtimer *m = container_of(t, struct mtimer, t);

	m->fired++;
	/* Deadlines come out non-decreasing, and never before they are due. */
	if (t->expires < many.last_expires)
		many.order_ok = false;
	many.last_expires = t->expires;
	if (loop_now_ms(many.l) < t->expires)
		many.late_ok = false;
	if (++many.fired == many.expect)
		loop_stop(many.l);
}

static void test_100k_timers(void **state)
{
	uint32_t seed = 12345;
	uint64_t t0, t_arm, t_run;

	(void)state;
	memset(&many, 0, sizeof(many));
	many.order_ok = many.late_ok = true;
	many.l = loop_new();
	assert_non_null(many.l);
	many.tm = calloc(MANY, sizeof(*many.tm));
	assert_non_null(many.tm);

	t0 = mono_ms();
	for (int i = 0; i < MANY; i++) {
		seed = seed * 1103515245u + 12345u;
		many.tm[i].t.cb = many_cb;
		assert_int_equal(loop_timer_arm(many.l, &many.tm[i].t, (seed >> 8) % 200), 0);
	}
	/* Cancel every third, re-arm every seventh (a moved deadline). */
	for (int i = 0; i < MANY; i++) {
		if (i % 3 == 0) {
			loop_timer_cancel(many.l, &many.tm[i].t);
			many.tm[i].cancelled = true;
		} else if (i % 7 == 0) {
			assert_int_equal(loop_timer_arm(many.l, &many.tm[i].t, 150 - i % 100), 0);
		}
	}
	for (int i = 0; i < MANY; i++)
		many.expect += !many.tm[i].cancelled;
	t_arm = mono_ms() - t0;

	t0 = mono_ms();
	assert_true(run_bounded(many.l, 10000));
	t_run = mono_ms() - t0;
	print_message("    100k timers: arm+cancel %llu ms, run %llu ms "
		      "(deadlines up to 200 ms)\n",
		      (unsigned long long)t_arm, (unsigned long long)t_run);

	assert_int_equal(many.fired, many.expect);
	assert_true(many.order_ok);
	assert_true(many.late_ok);
	for (int i = 0; i < MANY; i++) {
		assert_int_equal(many.tm[i].fired, many.tm[i].cancelled ? 0 : 1);
		assert_false(loop_timer_armed(&many.tm[i].t));
	}
	free(many.tm);
	loop_free(many.l);
}

/* --- evs deleted in the middle of a batch --------------------------------- */

struct pev {
	struct ev ev;
	int calls;
	bool deleted;
	int id;
};

static struct {
	struct loop *l;
	struct pev *p[2];
	int first;
	int reused_fd;
	int reused_calls;
	int reused_bad_fd;
	bool reuse;
	struct timer batch_end; /* 0 ms: fires once the batch is over */
	bool batch_ended;
	bool reused_too_early;
} mb;

static void batch_end_cb(struct timer *t)
{
	(void)t;
	mb.batch_ended = true;
}

static void reused_cb(struct ev *ev, uint32_t events)
{
	uint64_t v;

	(void)events;
	if (ev->fd != mb.reused_fd)
		mb.reused_bad_fd++;
	/* Called within the batch of the deletion: a stale event got through.
	 */
	if (!mb.batch_ended)
		mb.reused_too_early = true;
	mb.reused_calls++;
	assert_int_equal(read(ev->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	loop_stop(mb.l);
}

static void mb_cb(struct ev *ev, uint32_t events)
{
	struct pev *me = container_of(ev, struct pev, ev);
	struct pev *other = mb.p[1 - me->id];
	uint64_t v, one = 1;

	(void)events;
	me->calls++;
	assert_false(me->deleted); /* the loop called a deleted ev */
	assert_int_equal(read(ev->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	if (mb.first >= 0)
		return;
	mb.first = me->id;
	/* The other eventfd is readable too, so its event is in this batch. */
	assert_int_equal(loop_del(mb.l, &other->ev), 0);
	close(other->ev.fd);
	other->deleted = true;
	if (!mb.reuse) {
		loop_stop(mb.l);
		return;
	}
	/* Same struct ev, new fd, added again within the same batch: the
	 * stale pending event must not reach it; the new fd's event must. */
	other->ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(other->ev.fd >= 0);
	mb.reused_fd = other->ev.fd;
	other->ev.cb = reused_cb;
	mb.batch_end.cb = batch_end_cb;
	assert_int_equal(loop_timer_arm(mb.l, &mb.batch_end, 0), 0);
	assert_int_equal(write(other->ev.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	assert_int_equal(loop_add(mb.l, &other->ev, EPOLLIN), 0);
}

static void run_mid_batch(bool reuse)
{
	uint64_t one = 1;

	memset(&mb, 0, sizeof(mb));
	mb.first = -1;
	mb.reuse = reuse;
	mb.l = loop_new();
	assert_non_null(mb.l);
	for (int i = 0; i < 2; i++) {
		mb.p[i] = calloc(1, sizeof(*mb.p[i]));
		assert_non_null(mb.p[i]);
		mb.p[i]->id = i;
		mb.p[i]->ev.cb = mb_cb;
		mb.p[i]->ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(mb.p[i]->ev.fd >= 0);
		assert_int_equal(write(mb.p[i]->ev.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		assert_int_equal(loop_add(mb.l, &mb.p[i]->ev, EPOLLIN), 0);
	}
	assert_true(run_bounded(mb.l, 2000));

	assert_true(mb.first == 0 || mb.first == 1);
	assert_int_equal(mb.p[mb.first]->calls, 1);
	assert_int_equal(mb.p[1 - mb.first]->calls, 0);
	if (reuse) {
		assert_int_equal(mb.reused_calls, 1);
		assert_int_equal(mb.reused_bad_fd, 0);
		assert_false(mb.reused_too_early);
	}
	for (int i = 0; i < 2; i++) {
		if (!mb.p[i]->deleted || reuse) {
			assert_int_equal(loop_del(mb.l, &mb.p[i]->ev), 0);
			close(mb.p[i]->ev.fd);
		}
		free(mb.p[i]);
	}
	loop_free(mb.l);
}

static void test_ev_deleted_mid_batch(void **state)
{
	(void)state;
	run_mid_batch(false);
}

static void test_ev_deleted_and_readded_mid_batch(void **state)
{
	(void)state;
	run_mid_batch(true);
}

/* An ev that deletes and frees itself in its own callback (valgrind/ASan
 * would see any later touch), with 200 such evs all ready in one batch. */
struct selfdel {
	struct ev ev;
	struct loop *l;
	int *count;
};

static void selfdel_cb(struct ev *ev, uint32_t events)
{
	struct selfdel *s = container_of(ev, struct selfdel, ev);
	struct loop *l = s->l;
	int *count = s->count;

	(void)events;
	assert_int_equal(loop_del(l, ev), 0);
	close(ev->fd);
	free(s);
	if (++*count == 200)
		loop_stop(l);
}

/* --- loop_unreported_since(): what the last batch held -------------------- */

static struct {
	struct loop *l;
	struct ev e[3]; /* eventfds: a, b, c */
	uint64_t seq0;
	int phase;
	bool ok1, ok2;
} ur;

static void ur_cb(struct ev *ev, uint32_t events)
{
	uint64_t v, one = 1;
	struct ev *a = &ur.e[0], *b = &ur.e[1], *c = &ur.e[2];

	(void)events;
	assert_int_equal(read(ev->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	if (ur.phase == 0) {
		/* The batch holds b alone: a was not reported, b was; and no
		 * batch came after the one now dispatched. */
		assert_ptr_equal(ev, b);
		ur.ok1 = loop_unreported_since(ur.l, a, ur.seq0) &&
			 !loop_unreported_since(ur.l, b, ur.seq0) &&
			 !loop_unreported_since(ur.l, a, loop_batch_seq(ur.l));
		ur.phase = 1;
		assert_int_equal(write(a->fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		assert_int_equal(write(c->fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		return;
	}
	/* The next batch holds a and c: the one not dispatched yet is
	 * pending, so reported too; b, read empty, is not in it. */
	assert_true(ev == a || ev == c);
	ur.ok2 = !loop_unreported_since(ur.l, a, ur.seq0) &&
		 !loop_unreported_since(ur.l, c, ur.seq0) &&
		 loop_unreported_since(ur.l, b, ur.seq0);
	loop_stop(ur.l);
}

static void test_unreported_since(void **state)
{
	uint64_t one = 1;
	int i;

	(void)state;
	memset(&ur, 0, sizeof(ur));
	ur.l = loop_new();
	assert_non_null(ur.l);
	for (i = 0; i < 3; i++) {
		ur.e[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(ur.e[i].fd >= 0);
		ur.e[i].cb = ur_cb;
		assert_int_equal(loop_add(ur.l, &ur.e[i], EPOLLIN), 0);
	}
	ur.seq0 = loop_batch_seq(ur.l);
	/* No batch since seq0: nothing can be said yet. */
	assert_false(loop_unreported_since(ur.l, &ur.e[0], ur.seq0));
	assert_int_equal(write(ur.e[1].fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	assert_true(run_bounded(ur.l, 2000));
	assert_true(ur.ok1);
	assert_true(ur.ok2);
	for (i = 0; i < 3; i++) {
		assert_int_equal(loop_del(ur.l, &ur.e[i]), 0);
		close(ur.e[i].fd);
	}
	loop_free(ur.l);
}

static void test_ev_frees_itself(void **state)
{
	struct loop *l = loop_new();
	uint64_t one = 1;
	int count = 0;

	(void)state;
	assert_non_null(l);
	for (int i = 0; i < 200; i++) {
		struct selfdel *s = calloc(1, sizeof(*s));

		assert_non_null(s);
		s->l = l;
		s->count = &count;
		s->ev.cb = selfdel_cb;
		s->ev.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(s->ev.fd >= 0);
		assert_int_equal(write(s->ev.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
		assert_int_equal(loop_add(l, &s->ev, EPOLLIN), 0);
	}
	assert_true(run_bounded(l, 2000));
	assert_int_equal(count, 200);
	loop_free(l);
}

/* --- posts and stop from other threads ------------------------------------ */

#define NPOSTS 1000

static struct {
	struct loop *l;
	pthread_t loop_thread;
	uintptr_t next;
	bool order_ok;
	bool thread_ok;
} po;

static void post_fn(void *arg)
{
	uintptr_t i = (uintptr_t)arg;

	if (i != po.next)
		po.order_ok = false;
	if (!pthread_equal(pthread_self(), po.loop_thread))
		po.thread_ok = false;
	po.next++;
	if (i == NPOSTS - 1)
		loop_stop(po.l);
}

static void *poster(void *arg)
{
	(void)arg;
	usleep(10000); /* let the loop block in epoll_wait first */
	for (uintptr_t i = 0; i < NPOSTS; i++)
		if (loop_post(po.l, post_fn, (void *)i))
			break;
	return NULL;
}

static void test_post_from_thread(void **state)
{
	pthread_t th;

	(void)state;
	memset(&po, 0, sizeof(po));
	po.order_ok = po.thread_ok = true;
	po.l = loop_new();
	assert_non_null(po.l);
	po.loop_thread = pthread_self();
	assert_int_equal(pthread_create(&th, NULL, poster, NULL), 0);
	assert_true(run_bounded(po.l, 5000));
	pthread_join(th, NULL);
	assert_int_equal(po.next, NPOSTS);
	assert_true(po.order_ok);
	assert_true(po.thread_ok);
	loop_free(po.l);
}

static void never_fn(void *arg)
{
	*(int *)arg += 1;
}

/* Posts that never ran are dropped by loop_free, not called, not leaked. */
static void test_post_dropped_at_free(void **state)
{
	struct loop *l = loop_new();
	int calls = 0;

	(void)state;
	assert_non_null(l);
	for (int i = 0; i < 10; i++)
		assert_int_equal(loop_post(l, never_fn, &calls), 0);
	loop_free(l);
	assert_int_equal(calls, 0);
}

static void *stopper(void *arg)
{
	usleep(30000);
	loop_stop(arg);
	return NULL;
}

static volatile sig_atomic_t sig_count;

static void on_sig(int sig)
{
	(void)sig;
	sig_count++;
}

struct kill_arg {
	pthread_t target;
	struct loop *l;
};

static void *interrupter(void *arg)
{
	struct kill_arg *k = arg;

	for (int i = 0; i < 5; i++) {
		usleep(10000);
		pthread_kill(k->target, SIGUSR1);
	}
	usleep(10000);
	loop_stop(k->l);
	return NULL;
}

static void test_stop_and_eintr(void **state)
{
	struct sigaction sa = { .sa_handler = on_sig }, old;
	struct loop *l = loop_new();
	struct kill_arg k;
	uint64_t t0, dt;
	pthread_t th;

	(void)state;
	assert_non_null(l);

	/* A stop that comes first makes the next run return at once. */
	loop_stop(l);
	t0 = mono_ms();
	assert_int_equal(loop_run(l), 0);
	assert_true(mono_ms() - t0 < 100);

	/* Stop from another thread wakes a loop blocked with no timers. */
	assert_int_equal(pthread_create(&th, NULL, stopper, l), 0);
	t0 = mono_ms();
	assert_int_equal(loop_run(l), 0);
	dt = mono_ms() - t0;
	pthread_join(th, NULL);
	assert_true(dt >= 25 && dt < 2000);

	/* Signals without SA_RESTART interrupt epoll_wait: not an error. */
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
	sig_count = 0;
	k.target = pthread_self();
	k.l = l;
	assert_int_equal(pthread_create(&th, NULL, interrupter, &k), 0);
	assert_true(run_bounded(l, 5000));
	pthread_join(th, NULL);
	sigaction(SIGUSR1, &old, NULL);
	assert_int_equal(sig_count, 5);
	loop_free(l);
}

/* --- a timer that fell due while the loop was held up ---------------------- */

/*
 * A callback holds the loop up for 100 ms; 20 ms in, bytes arrive on a pipe
 * whose owner's timeout is due at 50 ms. The bytes came in time, so the
 * loop must hand them over before it fires that timeout. The callback arms
 * the timeout itself, so that a test thread descheduled before the loop
 * looks first cannot make the timer due before the stall.
 */
static struct {
	struct loop *l;
	struct ev stall, pipe;
	struct timer timeout;
	int wfd;
	char order[8];
	int n;
	unsigned long busy_events;
} held;

static void held_note(char what)
{
	if (held.n < (int)sizeof(held.order) - 1)
		held.order[held.n++] = what;
}

static void held_stall(struct ev *ev, uint32_t events)
{
	uint64_t v;
	char b = 'x';

	(void)events;
	assert_int_equal(read(ev->fd, &v, sizeof(v)), (ssize_t)sizeof(v));
	assert_int_equal(loop_timer_arm(held.l, &held.timeout, 50), 0);
	usleep(20000);
	assert_int_equal(write(held.wfd, &b, 1), 1);
	usleep(80000);
}

static void held_read(struct ev *ev, uint32_t events)
{
	char b[8];

	(void)events;
	if (read(ev->fd, b, sizeof(b)) > 0)
		held_note('r');
}

static void held_timeout(struct timer *t)
{
	(void)t;
	held_note('t');
	loop_stop(held.l);
}

static void test_timer_waits_for_bytes_that_came_in_time(void **state)
{
	uint64_t one = 1;
	int p[2];

	(void)state;
	memset(&held, 0, sizeof(held));
	held.l = loop_new();
	assert_non_null(held.l);
	assert_int_equal(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	held.wfd = p[1];
	held.pipe.fd = p[0];
	held.pipe.cb = held_read;
	held.stall.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	held.stall.cb = held_stall;
	assert_true(held.stall.fd >= 0);
	assert_int_equal(loop_add(held.l, &held.pipe, EPOLLIN), 0);
	assert_int_equal(loop_add(held.l, &held.stall, EPOLLIN), 0);
	held.timeout.cb = held_timeout;
	assert_int_equal(write(held.stall.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	assert_true(run_bounded(held.l, 5000));
	assert_string_equal(held.order, "rt");

	assert_int_equal(loop_del(held.l, &held.pipe), 0);
	assert_int_equal(loop_del(held.l, &held.stall), 0);
	close(p[0]);
	close(p[1]);
	close(held.stall.fd);
	loop_free(held.l);
}

/* An fd that is always ready does not hold a timer off. */
static void busy_event(struct ev *ev, uint32_t events)
{
	(void)ev;
	(void)events;
	held.busy_events++; /* never read: level-triggered, ready again at once */
}

static void test_busy_fd_does_not_hold_timers_off(void **state)
{
	uint64_t one = 1, t0, dt;

	(void)state;
	memset(&held, 0, sizeof(held));
	held.l = loop_new();
	assert_non_null(held.l);
	held.stall.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	held.stall.cb = busy_event;
	assert_true(held.stall.fd >= 0);
	assert_int_equal(write(held.stall.fd, &one, sizeof(one)), (ssize_t)sizeof(one));
	assert_int_equal(loop_add(held.l, &held.stall, EPOLLIN), 0);
	held.timeout.cb = held_timeout;
	assert_int_equal(loop_timer_arm(held.l, &held.timeout, 20), 0);
	t0 = mono_ms();
	assert_true(run_bounded(held.l, 5000));
	dt = mono_ms() - t0;
	assert_string_equal(held.order, "t");
	assert_true(dt >= 20 && dt < 2000);
	assert_true(held.busy_events > 10);

	assert_int_equal(loop_del(held.l, &held.stall), 0);
	close(held.stall.fd);
	loop_free(held.l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timers_fire_in_order),
		cmocka_unit_test(test_timer_cancel_from_callback),
		cmocka_unit_test(test_zero_timer_does_not_starve),
		cmocka_unit_test(test_100k_timers),
		cmocka_unit_test(test_ev_deleted_mid_batch),
		cmocka_unit_test(test_ev_deleted_and_readded_mid_batch),
		cmocka_unit_test(test_ev_frees_itself),
		cmocka_unit_test(test_unreported_since),
		cmocka_unit_test(test_post_from_thread),
		cmocka_unit_test(test_post_dropped_at_free),
		cmocka_unit_test(test_stop_and_eintr),
		cmocka_unit_test(test_timer_waits_for_bytes_that_came_in_time),
		cmocka_unit_test(test_busy_fd_does_not_hold_timers_off),
	};

	alarm(120); /* a hang (e.g. a timer spinning in one pass) is a failure */
	return cmocka_run_group_tests(tests, NULL, NULL);
}
