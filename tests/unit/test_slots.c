/* SPDX-License-Identifier: MIT */
/*
 * test_slots: fair admission between tenants. A tenant that queued many
 * runs does not make another wait behind all of them (tenants take
 * turns); a tenant at its own queue bound is refused with -EDQUOT and a
 * retry estimate while another still queues; a tenant at its running cap
 * waits although slots are free, and another runs at once; the shared
 * queue's bound still refuses with -EBUSY; the per-tenant queue bound is
 * clamped so one place stays for others; cancellation and draining free
 * the tenant's place.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "run/slots.h"
#include "tap.h"
#include "util/mono.h"

/* A caller on a thread of its own. */
struct caller {
	struct slots *s;
	const char *tenant;
	const char *label;
	int cancel_fd;
	int rc;
	pthread_t th;
};

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static char order[256];

static void *caller_main(void *arg)
{
	struct caller *c = arg;
	unsigned retry;

	c->rc =
	    slots_acquire(c->s, c->tenant, c->cancel_fd, NULL, NULL, &retry);
	if (c->rc != 0)
		return NULL;
	/* Recorded while holding the slot: the order slots were granted. */
	pthread_mutex_lock(&order_mu);
	if (strlen(order) + strlen(c->label) + 2 < sizeof(order)) {
		if (order[0])
			memcpy(order + strlen(order), " ", 2);
		memcpy(order + strlen(order), c->label, strlen(c->label) + 1);
	}
	pthread_mutex_unlock(&order_mu);
	slots_release(c->s, c->tenant, 1);
	return NULL;
}

static void start(struct caller *c, struct slots *s, const char *tenant,
                  const char *label)
{
	memset(c, 0, sizeof(*c));
	c->s = s;
	c->tenant = tenant;
	c->label = label;
	c->cancel_fd = -1;
	pthread_create(&c->th, NULL, caller_main, c);
}

/* Waits (generously) until tenant has want runs queued. */
static bool wait_queued(struct slots *s, const char *tenant, unsigned want)
{
	long long end = mono_ms() + 20000;
	unsigned r, q;

	for (;;) {
		slots_tenant(s, tenant, &r, &q);
		if (q == want)
			return true;
		if (mono_ms() > end)
			return false;
		usleep(2000);
	}
}

static void test_turns(void)
{
	struct slots *s = slots_create(1, 16, 0, 8);
	struct caller c[4];
	const char *labels[] = {"a1", "a2", "a3"};
	unsigned retry;
	int rc;

	order[0] = '\0';
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice takes the only slot");
	for (int i = 0; i < 3; i++) {
		start(&c[i], s, "alice", labels[i]);
		ok(wait_queued(s, "alice", (unsigned)i + 1),
		   "alice's run %d waits", i + 1);
	}
	start(&c[3], s, "bob", "b1");
	ok(wait_queued(s, "bob", 1), "bob's run waits behind alice's three");
	slots_release(s, "alice", 1);
	for (int i = 0; i < 4; i++)
		pthread_join(c[i].th, NULL);
	is_str(order, "b1 a1 a2 a3",
	       "the freed slot goes to bob first, then alice's in order");
	for (int i = 0; i < 4; i++)
		is_int(c[i].rc, 0, "every queued run got a slot");
	slots_destroy(s);
}

static void test_tenant_queue_bound(void)
{
	struct slots *s = slots_create(1, 16, 0, 2);
	struct slots_stats st;
	struct caller c[3];
	unsigned retry = 0;
	int rc;

	order[0] = '\0';
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice takes the only slot");
	start(&c[0], s, "alice", "a1");
	ok(wait_queued(s, "alice", 1), "alice's first waits");
	start(&c[1], s, "alice", "a2");
	ok(wait_queued(s, "alice", 2), "alice's second waits");
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, -EDQUOT, "alice's third is refused: her queue is full");
	ok(retry >= 1 && retry <= 600, "with a retry estimate (%u s)", retry);
	start(&c[2], s, "bob", "b1");
	ok(wait_queued(s, "bob", 1), "bob still queues");
	slots_stats(s, &st);
	is_int(st.queued, 3, "three runs wait in all");
	is_int(st.tenants, 2, "two tenants are known");
	slots_release(s, "alice", 1);
	for (int i = 0; i < 3; i++)
		pthread_join(c[i].th, NULL);
	is_str(order, "b1 a1 a2", "bob first, then alice's");
	slots_stats(s, &st);
	is_int(st.running + st.queued, 0, "all ended");
	is_int(st.tenants, 0, "idle tenants are forgotten");
	slots_destroy(s);
}

static void test_running_cap(void)
{
	struct slots *s = slots_create(3, 16, 1, 8);
	struct caller c;
	unsigned retry, r, q;
	int rc;

	order[0] = '\0';
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice runs one");
	start(&c, s, "alice", "a2");
	ok(wait_queued(s, "alice", 1),
	   "alice's second waits although two slots are free");
	rc = slots_acquire(s, "bob", -1, NULL, NULL, &retry);
	is_int(rc, 0, "bob runs at once");
	slots_tenant(s, "alice", &r, &q);
	ok(r == 1 && q == 1, "alice: 1 running, 1 waiting (%u, %u)", r, q);
	slots_release(s, "alice", 1);
	pthread_join(c.th, NULL);
	is_int(c.rc, 0, "alice's second ran once her first ended");
	slots_release(s, "bob", 1);
	slots_destroy(s);
}

static void test_shared_queue_bound(void)
{
	struct slots *s = slots_create(1, 1, 0, 0);
	struct slots_stats st;
	struct caller c;
	unsigned retry = 0;
	int rc;

	slots_stats(s, &st);
	is_int(st.tenant_max_queued, 1, "a queue of one: a tenant may use it");
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice runs");
	start(&c, s, "bob", "b1");
	ok(wait_queued(s, "bob", 1), "bob waits");
	rc = slots_acquire(s, "carol", -1, NULL, NULL, &retry);
	is_int(rc, -EBUSY, "carol: the shared queue is full");
	ok(retry >= 1, "with a retry estimate");
	slots_release(s, "alice", 1);
	pthread_join(c.th, NULL);
	slots_destroy(s);
}

static void test_clamp(void)
{
	struct {
		unsigned queue, asked, want;
	} cases[] = {{32, 8, 8}, {32, 0, 31}, {32, 100, 31}, {4, 3, 3},
	             {2, 0, 1},  {1, 5, 1},   {0, 5, 0}};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct slots *s =
		    slots_create(2, cases[i].queue, 0, cases[i].asked);
		struct slots_stats st;

		slots_stats(s, &st);
		ok(st.tenant_max_queued == cases[i].want,
		   "queue %u, asked %u: applied %u (want %u)", cases[i].queue,
		   cases[i].asked, st.tenant_max_queued, cases[i].want);
		slots_destroy(s);
	}
}

static void test_cancel_and_drain(void)
{
	struct slots *s = slots_create(1, 8, 0, 4);
	struct slots_stats st;
	struct caller c, d;
	uint64_t one = 1;
	unsigned retry;
	int rc;

	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice runs");
	/* The cancel descriptor is set before the thread starts. */
	memset(&c, 0, sizeof(c));
	c.s = s;
	c.tenant = "bob";
	c.label = "b-cancel";
	c.cancel_fd = eventfd(0, EFD_CLOEXEC);
	pthread_create(&c.th, NULL, caller_main, &c);
	ok(wait_queued(s, "bob", 1), "bob's run waits");
	if (write(c.cancel_fd, &one, sizeof(one)) < 0)
		ok(false, "cancel");
	pthread_join(c.th, NULL);
	is_int(c.rc, -ECANCELED, "a cancelled waiter leaves the queue");
	close(c.cancel_fd);
	slots_stats(s, &st);
	ok(st.queued == 0 && st.tenants == 1,
	   "bob is forgotten (queued %u, tenants %u)", st.queued, st.tenants);

	start(&d, s, "carol", "c1");
	ok(wait_queued(s, "carol", 1), "carol's run waits");
	start(&c, s, "dave", "d1");
	ok(wait_queued(s, "dave", 1), "dave's run waits");
	slots_release(s, "alice", 1);
	pthread_join(d.th, NULL);
	pthread_join(c.th, NULL);
	is_int(d.rc + c.rc, 0, "both ran");
	slots_destroy(s);

	s = slots_create(1, 8, 0, 4);
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice runs");
	start(&c, s, "bob", "b1");
	ok(wait_queued(s, "bob", 1), "bob's run waits");
	slots_release(s, "alice", 0);
	pthread_join(c.th, NULL);
	is_int(c.rc, 0, "bob ran after alice");
	rc = slots_acquire(s, "alice", -1, NULL, NULL, &retry);
	is_int(rc, 0, "alice runs again");
	start(&c, s, "bob", "b2");
	ok(wait_queued(s, "bob", 1), "bob's next waits");
	is_int(slots_drain(s, 10), 1, "draining: alice still runs");
	pthread_join(c.th, NULL);
	is_int(c.rc, -ESHUTDOWN, "the waiter is refused");
	rc = slots_acquire(s, "carol", -1, NULL, NULL, &retry);
	is_int(rc, -ESHUTDOWN, "later callers are refused");
	slots_release(s, "alice", 1);
	slots_stats(s, &st);
	ok(st.running == 0 && st.tenants == 0, "nothing is left");
	slots_destroy(s);
}

int main(void)
{
	test_turns();
	test_tenant_queue_bound();
	test_running_cap();
	test_shared_queue_bound();
	test_clamp();
	test_cancel_and_drain();
	return tap_done();
}
