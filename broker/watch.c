// SPDX-License-Identifier: MIT
/* `sluice watch`: decisions and held requests streamed as JSON lines.
 *
 * Theory of operation: a watcher is a control connection that asked
 * `watch` and was handed over here (control.c); it lives on the control
 * thread until it hangs up or is dropped. Producers (audit_log() on any
 * thread, a request held on a worker) call watch_emit(), which does
 * nothing unless someone watches; else it copies the line into a bounded
 * queue under a mutex and wakes the control loop (an eventfd). The control
 * loop moves the queued lines into each watcher's own bounded buffer and
 * writes what its socket takes now. Nobody waits for a watcher: a line that
 * finds the queue full is lost (counted, and said in the stream once there
 * is room), and a watcher whose buffer would overflow (it reads slower than
 * decisions come) is dropped, told why if its socket takes it. At most
 * WATCH_MAX watchers at once; one more is refused.
 *
 * A control_group member's watcher (watch_add() with its uid) gets only
 * the lines of the sandboxes that are its own (sandbox_owner(), looked up
 * on the control loop as the lines are handed out): a line of a sandbox
 * gone by then, or of none, is not its. Root's and the broker's own get
 * every line.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "broker/audit.h"
#include "broker/broker_internal.h"
#include "common/loop.h"
#include "common/ctlproto.h"
#include "common/json.h"
#include "common/log.h"

#define WATCH_QUEUE 1024       /* lines waiting for the control loop */
#define WATCH_BUF (256 * 1024) /* bytes a watcher may be behind */

struct qline {
	struct qline *next;
	size_t len;
	char sandbox[SANDBOX_NAME_MAX + 1]; /* whose line; "" none */
	char text[];
};

struct watcher {
	struct ev ev;
	bool used;
	uint32_t only; /* OWNER_ANY, or the uid whose sandboxes' lines it gets */
	char *buf;     /* WATCH_BUF */
	size_t off, len;
};

static struct {
	struct loop *loop;
	struct sandbox_table *tab;
	struct ev wake; /* eventfd */
	atomic_uint n;	/* watchers: producers skip all work when 0 */
	pthread_mutex_t lock;
	struct qline *head, *tail; /* under lock */
	size_t queued;		   /* under lock */
	uint64_t lost;		   /* lines the full queue refused; under lock */
	struct watcher w[WATCH_MAX];
	uint64_t dropped; /* watchers dropped for being slow */
} wt = { .wake.fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER };

static void watcher_close(struct watcher *w)
{
	loop_del(wt.loop, &w->ev);
	close(w->ev.fd);
	free(w->buf);
	memset(w, 0, sizeof(*w));
	w->ev.fd = -1;
	atomic_fetch_sub(&wt.n, 1);
}

/* Writes what @w's socket takes now; closes it on an error. */
static void watcher_flush(struct watcher *w)
{
	while (w->off < w->len) {
		ssize_t k = send(w->ev.fd, w->buf + w->off, w->len - w->off, MSG_NOSIGNAL);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			loop_mod(wt.loop, &w->ev, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
			return;
		}
		if (k <= 0) {
			watcher_close(w);
			return;
		}
		w->off += (size_t)k;
	}
	w->off = w->len = 0;
	loop_mod(wt.loop, &w->ev, EPOLLIN | EPOLLRDHUP);
}

/* Appends @len bytes to @w; a watcher that cannot take them is dropped. */
static void watcher_put(struct watcher *w, const char *s, size_t len)
{
	static const char slow[] = "{\"event\":\"dropped\",\"reason\":\"too slow\"}\n";

	if (w->off && w->len + len > WATCH_BUF) {
		memmove(w->buf, w->buf + w->off, w->len - w->off);
		w->len -= w->off;
		w->off = 0;
	}
	if (w->len + len > WATCH_BUF) {
		wt.dropped++;
		log_warn("watch: a watcher fell %d KiB behind: dropped (%llu so far)",
			 WATCH_BUF / 1024, (unsigned long long)wt.dropped);
		(void)!send(w->ev.fd, slow, sizeof(slow) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		watcher_close(w);
		return;
	}
	memcpy(w->buf + w->len, s, len);
	w->len += len;
}

static void on_watcher(struct ev *ev, uint32_t events)
{
	struct watcher *w = container_of(ev, struct watcher, ev);
	char sink[256];
	ssize_t k;

	if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
		/* A watcher says nothing: anything but EAGAIN ends it. */
		k = recv(ev->fd, sink, sizeof(sink), MSG_DONTWAIT);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) ||
		    (events & (EPOLLHUP | EPOLLERR))) {
			watcher_close(w);
			return;
		}
	}
	if (events & EPOLLOUT)
		watcher_flush(w);
}

/* Is @q a line for @w? The owner of the line's sandbox, looked up once per
 * run of lines of one sandbox (*@last, *@owner; -1: none). */
static bool line_for(const struct watcher *w, const struct qline *q, const struct qline **last,
		     int64_t *owner)
{
	uint32_t uid;

	if (w->only == OWNER_ANY)
		return true;
	if (!*last || strcmp((*last)->sandbox, q->sandbox)) {
		*last = q;
		*owner = q->sandbox[0] && wt.tab && sandbox_owner(wt.tab, q->sandbox, &uid) == 0
				 ? (int64_t)uid
				 : -1;
	}
	return *owner == (int64_t)w->only;
}

/* On the control loop: the queue into every watcher. */
static void on_wake(struct ev *ev, uint32_t events)
{
	struct qline *list, *q;
	uint64_t v, lost;
	char note[96];
	int i, n;

	(void)events;
	(void)!read(ev->fd, &v, sizeof(v));
	pthread_mutex_lock(&wt.lock);
	list = wt.head;
	wt.head = wt.tail = NULL;
	wt.queued = 0;
	lost = wt.lost;
	wt.lost = 0;
	pthread_mutex_unlock(&wt.lock);
	n = lost ? snprintf(note, sizeof(note), "{\"event\":\"lost\",\"lines\":%llu}\n",
			    (unsigned long long)lost)
		 : 0;
	for (i = 0; i < WATCH_MAX; i++) {
		const struct qline *last = NULL;
		int64_t owner = -1;

		if (!wt.w[i].used)
			continue;
		if (n > 0)
			watcher_put(&wt.w[i], note, (size_t)n);
		for (q = list; q && wt.w[i].used; q = q->next)
			if (line_for(&wt.w[i], q, &last, &owner))
				watcher_put(&wt.w[i], q->text, q->len);
		if (wt.w[i].used)
			watcher_flush(&wt.w[i]);
	}
	while ((q = list)) {
		list = q->next;
		free(q);
	}
}

int watch_start(struct loop *l, struct sandbox_table *tab)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), i;

	if (fd < 0)
		return -errno;
	wt.loop = l;
	wt.tab = tab;
	wt.wake.fd = fd;
	wt.wake.cb = on_wake;
	for (i = 0; i < WATCH_MAX; i++)
		wt.w[i].ev.fd = -1;
	if (loop_add(l, &wt.wake, EPOLLIN) < 0) {
		close(fd);
		wt.wake.fd = -1;
		return -ENOMEM;
	}
	return 0;
}

void watch_stop(void)
{
	struct qline *q;
	int i;

	for (i = 0; i < WATCH_MAX; i++)
		if (wt.w[i].used)
			watcher_close(&wt.w[i]);
	if (wt.wake.fd >= 0) {
		loop_del(wt.loop, &wt.wake);
		close(wt.wake.fd);
		wt.wake.fd = -1;
	}
	pthread_mutex_lock(&wt.lock);
	while ((q = wt.head)) {
		wt.head = q->next;
		free(q);
	}
	wt.tail = NULL;
	wt.queued = 0;
	pthread_mutex_unlock(&wt.lock);
}

int watch_add(int fd, uint32_t only)
{
	struct watcher *w = NULL;
	int i;

	if (wt.wake.fd < 0)
		return -ENOTCONN;
	for (i = 0; i < WATCH_MAX && !w; i++)
		if (!wt.w[i].used)
			w = &wt.w[i];
	if (!w)
		return -EBUSY;
	w->buf = malloc(WATCH_BUF);
	if (!w->buf)
		return -ENOMEM;
	w->ev.fd = fd;
	w->ev.cb = on_watcher;
	w->only = only;
	if (loop_add(wt.loop, &w->ev, EPOLLIN | EPOLLRDHUP) < 0) {
		free(w->buf);
		w->buf = NULL;
		w->ev.fd = -1;
		return -ENOMEM;
	}
	w->used = true;
	atomic_fetch_add(&wt.n, 1);
	watcher_put(w, CTL_OK, strlen(CTL_OK));
	watcher_flush(w);
	return 0;
}

void watch_counts(unsigned *watchers, uint64_t *dropped)
{
	*watchers = atomic_load(&wt.n);
	*dropped = wt.dropped;
}

bool watch_active(void)
{
	return atomic_load_explicit(&wt.n, memory_order_relaxed) > 0;
}

/* Queues a line ('\n' included) of sandbox @sandbox (NULL or "": none)
 * for the watchers; any thread, never waits. */
static void watch_emit(const char *sandbox, const char *line, size_t len)
{
	struct qline *q;
	uint64_t one = 1;

	if (!watch_active())
		return;
	q = malloc(sizeof(*q) + len);
	pthread_mutex_lock(&wt.lock);
	if (!q || wt.queued >= WATCH_QUEUE) {
		wt.lost++;
		pthread_mutex_unlock(&wt.lock);
		free(q);
		return;
	}
	memcpy(q->text, line, len);
	q->len = len;
	snprintf(q->sandbox, sizeof(q->sandbox), "%s", sandbox ? sandbox : "");
	q->next = NULL;
	if (wt.tail)
		wt.tail->next = q;
	else
		wt.head = q;
	wt.tail = q;
	wt.queued++;
	pthread_mutex_unlock(&wt.lock);
	(void)!write(wt.wake.fd, &one, sizeof(one));
}

void watch_audit(const struct audit_event *ev)
{
	static const char tag[] = "{\"event\":\"decision\",";
	char line[AUDIT_LINE_MAX + sizeof(tag)], *body = line + sizeof(tag) - 2;
	int n;

	if (!watch_active())
		return;
	n = audit_format(ev, body, AUDIT_LINE_MAX);
	if (n < 2 || body[0] != '{')
		return;
	/* The audit line, as the log has it, tagged as a decision. */
	memcpy(line, tag, sizeof(tag) - 1);
	watch_emit(ev->sandbox, line, (size_t)n + sizeof(tag) - 2);
}

void watch_pending(const char *sandbox, const char *host, uint16_t port, const char *method,
		   const char *path, uint32_t count)
{
	char line[1600], e_host[600], e_method[64], e_path[800], when[32];
	struct timespec ts;
	struct tm tm;
	int n;

	if (!watch_active())
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!gmtime_r(&ts.tv_sec, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(when, sizeof(when), "-");
	sl_json_escape(e_host, sizeof(e_host), host, strlen(host));
	sl_json_escape(e_method, sizeof(e_method), method, strlen(method));
	sl_json_escape(e_path, sizeof(e_path), path, strlen(path));
	n = snprintf(line, sizeof(line),
		     "{\"event\":\"pending\",\"time\":\"%s\",\"sandbox\":\"%s\",\"host\":\"%s\","
		     "\"port\":%u,\"method\":%s%s%s,\"path\":%s%s%s,\"count\":%u}\n",
		     when, sandbox, e_host, port, method[0] ? "\"" : "",
		     method[0] ? e_method : "null", method[0] ? "\"" : "", path[0] ? "\"" : "",
		     path[0] ? e_path : "null", path[0] ? "\"" : "", count);
	if (n > 0 && (size_t)n < sizeof(line))
		watch_emit(sandbox, line, (size_t)n);
}
