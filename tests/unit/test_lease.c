/* SPDX-License-Identifier: MIT */
/*
 * test_lease: conversation leases between two replicas sharing one store
 * (an SQLite file here; the pg suite runs the same against PostgreSQL when
 * MCPSD_TEST_PG_URL names one: tests/lib/pg.sh): the first run takes the lease;
 * the other replica waits (-EAGAIN) and is recorded as wanting it; the owner's
 * job hands it over only when nothing runs and its session is idle, and then
 * the lease is kept for the replica that asked; a replica that gets a
 * conversation back from another is told it moved; an owner that stops
 * renewing loses the lease once it expires (moved and lost); renewal keeps
 * it; a conversation the owner no longer holds is released by the job;
 * release_all releases everything; the counters count; the fence fires a
 * run whose lease the store stopped confirming, once, and no other.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run/lease.h"
#include "schema.h"
#include "store/store.h"
#include "tap.h"

static char dir[64];

/* What the fake holder says it keeps: per test, one conversation. */
static int held_state;
static unsigned hand_offs;

static int fake_holds(void *arg, const char *name)
{
	(void)arg;
	(void)name;
	return held_state;
}

static int fake_hand_off(void *arg, const char *name)
{
	(void)arg;
	(void)name;
	hand_offs++;
	held_state = 0;
	return 0;
}

/* The fence's fire: counts per handle (an int). */
static _Atomic int fired_n;
static void *fired_last;

static void fake_fire(void *handle)
{
	fired_last = handle;
	fired_n++;
}

/* Sleeps ms, renewing r's leases every 40 ms when renew. */
static void wait_ms(struct lease *r, int ms, bool renew)
{
	for (int t = 0; t < ms; t += 40) {
		if (renew && lease_renew(r, lease_now_ms()) < 0)
			ok(false, "renew");
		usleep(40 * 1000);
	}
}

/*
 * Fencing: a run whose lease the store has not confirmed for two thirds
 * of a lease is fired once; renewals keep it from firing; a run not
 * watched (or unwatched) never is.
 */
static void test_fence(struct store *st)
{
	struct lease *f = NULL;
	struct lease_grant g;
	int handle = 7, other = 8;
	long long t0, waited;

	ok(lease_create(st, "fence", 1500, &f) == 0,
	   "a replica with 1.5 s leases (fence at 1 s)");
	ok(lease_set_fence(f, fake_fire) == 0, "its fence thread starts");
	ok(lease_set_fence(f, fake_fire) == 0, "a second call is harmless");
	ok(lease_acquire(f, "fenced", lease_now_ms(), &g) == 0,
	   "a run takes its lease");
	lease_watch(f, "fenced", &handle);
	lease_watch(f, "fenced", &other); /* the first handle stays */
	wait_ms(f, 1600, true);
	ok(fired_n == 0, "renewed every 40 ms: never fired over 1.6 s (%d)",
	   fired_n);
	/* The fence counts from when the last renewal began: not before. */
	t0 = lease_now_ms();
	if (lease_renew(f, t0) < 0)
		ok(false, "renew");
	while (fired_n == 0 && lease_now_ms() - t0 < 10000)
		usleep(10 * 1000);
	waited = lease_now_ms() - t0;
	ok(fired_n == 1 && fired_last == &handle,
	   "no renewal: fired once, with the run's handle (%d)", fired_n);
	ok(waited >= 1000, "not before two thirds of the lease (%lld ms)",
	   waited);
	wait_ms(f, 500, false);
	ok(fired_n == 1, "fired only once (%d)", fired_n);
	lease_unwatch(f, "fenced", &handle);
	lease_done(f, "fenced");

	ok(lease_acquire(f, "quiet", lease_now_ms(), &g) == 0,
	   "another run takes its lease");
	lease_watch(f, "quiet", &handle);
	lease_unwatch(f, "quiet", &other); /* not its handle: kept */
	lease_unwatch(f, "quiet", &handle);
	wait_ms(f, 1300, false);
	ok(fired_n == 1, "an unwatched run is never fired (%d)", fired_n);
	lease_done(f, "quiet");
	{
		struct lease_stats s;

		lease_stats(f, &s);
		ok(s.fenced == 1, "fenced counted once (%llu)", s.fenced);
	}
	lease_destroy(f); /* joins the thread */
}

static struct store *open_store(void)
{
	const char *url = getenv("MCPSD_TEST_PG_URL");
	char p[128], err[512] = "";
	struct store *st = NULL;

	if (url && url[0])
		snprintf(p, sizeof(p), "%s", url);
	else
		snprintf(p, sizeof(p), "%s/state.db", dir);
	if (schema_open(p, &st, err, sizeof(err)) < 0)
		ok(false, "store opens: %s", err);
	return st;
}

int main(void)
{
	struct store *st;
	struct lease *a = NULL, *b = NULL;
	struct lease_grant g;
	struct lease_stats s;
	long long t = lease_now_ms();
	int r;

	snprintf(dir, sizeof(dir), "/tmp/test_lease.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	st = open_store();
	if (!st)
		return 1;
	ok(lease_create(st, "r1", 6000, &a) == 0 &&
	       lease_create(st, "r2", 6000, &b) == 0,
	   "two replicas' lease tables");
	ok(lease_create(st, "", 6000, &(struct lease *){NULL}) == -EINVAL,
	   "a replica without a name is refused");
	lease_set_holder(a, fake_holds, fake_hand_off, NULL);
	lease_set_holder(b, fake_holds, fake_hand_off, NULL);

	r = lease_acquire(a, "ws1", t, &g);
	ok(r == 0 && g.epoch == 1 && !g.moved, "r1 takes a new lease (%d)", r);
	r = lease_acquire(b, "ws1", t + 10, &g);
	ok(r == -EAGAIN && strcmp(g.from, "r1") == 0,
	   "r2 waits for r1's live lease (%d, from %s)", r, g.from);
	/* r1's run still goes on: the job hands nothing over. */
	held_state = 1;
	lease_job(a, 0);
	ok(hand_offs == 0, "no hand-over while r1 runs");
	lease_done(a, "ws1");
	r = lease_acquire(a, "ws1", lease_now_ms(), &g);
	ok(r == 0 && g.epoch == 1 && !g.moved,
	   "r1's next run renews its own lease (%d)", r);
	lease_done(a, "ws1");

	/* r2 asks again (now, on the real clock the job uses). */
	r = lease_acquire(b, "ws1", lease_now_ms(), &g);
	ok(r == -EAGAIN, "r2 still waits (%d)", r);
	held_state = 2;
	lease_job(a, 0);
	ok(hand_offs == 0, "a busy session is not handed over");
	held_state = 1;
	lease_job(a, 0);
	ok(hand_offs == 1, "r1's idle session is handed over");
	r = lease_acquire(a, "ws1", lease_now_ms(), &g);
	ok(r == -EAGAIN && strcmp(g.from, "r2") == 0,
	   "the released lease is kept for r2, not retaken by r1 (%d)", r);
	r = lease_acquire(b, "ws1", lease_now_ms(), &g);
	ok(r == 0 && g.moved && !g.lost && strcmp(g.from, "r1") == 0 &&
	       g.epoch == 2,
	   "r2 takes it: moved from r1, not lost, epoch 2 (%d %d %d %s "
	   "%lld)",
	   r, g.moved, g.lost, g.from, g.epoch);
	lease_done(b, "ws1");

	/* r2 dies: it renews no more; r1 takes over after the expiry. */
	t = lease_now_ms();
	r = lease_acquire(a, "ws1", t + 3000, &g);
	ok(r == -EAGAIN, "before the expiry r1 waits (%d)", r);
	r = lease_acquire(a, "ws1", t + 6001, &g);
	ok(r == 0 && g.moved && g.lost && strcmp(g.from, "r2") == 0 &&
	       g.epoch == 3,
	   "after it r1 takes over: moved, lost, epoch 3 (%d %d %d)", r,
	   g.moved, g.lost);
	lease_done(a, "ws1");
	r = lease_acquire(b, "ws1", t + 6002, &g);
	ok(r == -EAGAIN, "r2 back finds r1 holding it (%d)", r);

	/* Renewal keeps a lease past its first expiry. */
	r = lease_acquire(b, "ws2", t, &g);
	ok(r == 0, "r2 takes ws2 (%d)", r);
	lease_done(b, "ws2");
	ok(lease_renew(b, t + 5000) == 0, "r2 renews");
	r = lease_acquire(a, "ws2", t + 9000, &g);
	ok(r == -EAGAIN, "renewed: r1 still waits at +9 s (%d)", r);

	/* A conversation its owner no longer holds is released. */
	held_state = 0;
	lease_job(b, 0);
	r = lease_acquire(a, "ws2", lease_now_ms(), &g);
	ok(r == 0 && g.moved && !g.lost,
	   "released by r2's job: r1 takes it, moved, not lost (%d)", r);
	lease_done(a, "ws2");

	r = lease_release_all(a);
	ok(r == 2, "release_all releases r1's two leases (%d)", r);
	r = lease_acquire(b, "ws1", lease_now_ms(), &g);
	ok(r == 0 && g.moved && !g.lost, "r2 takes ws1 at once (%d)", r);
	lease_done(b, "ws1");

	lease_stats(a, &s);
	ok(s.handovers == 1 && s.moved_in == 2 && s.lost_in == 1 &&
	       s.waits >= 3,
	   "r1 counted 1 hand-over, 2 moved in, 1 lost, waits (%llu %llu "
	   "%llu %llu)",
	   s.handovers, s.moved_in, s.lost_in, s.waits);
	ok(lease_acquire(a, "x", 1, &g) == 0 && (lease_done(a, "x"), true),
	   "a short name works");
	{
		char big[LEASE_NAME_MAX + 8];

		memset(big, 'a', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		ok(lease_acquire(a, big, 1, &g) == -EINVAL,
		   "a name too long is refused");
	}
	test_fence(st);
	lease_destroy(a);
	lease_destroy(b);
	store_close(st);
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", dir);
	}
	return tap_done();
}
