/* SPDX-License-Identifier: MIT */
/*
 * test_mcp_lock: the MCP core's lock, through the public API and test
 * tools. A cancel hook that blocks does not stall other sessions; a 2 MB
 * result being streamed does not either; the on_cancel unregister guarantee
 * holds while cancellations race with it; and many threads creating,
 * calling, cancelling, reading and deleting sessions at once end with no
 * crash, deadlock or leak (run under valgrind and AddressSanitizer by
 * tests/run.sh). Checks are made on the main thread (tap is not
 * thread-safe); worker threads count what they saw in atomics.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "mcp/mcp.h"
#include "tap.h"
#include "util/log.h"
#include "util/mono.h"

#define TENANT "lock-test"
/* Liveness bound for an answer while another session's hook blocks. */
#define QUICK_MS 500
#define BIG_BYTES (2u * 1024 * 1024)

static struct config cfg;
static struct mcp_server *srv;

/* ------------------------------------------------------------------ */
/* small helpers */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static void sleep_us(long us)
{
	struct timespec ts = {0, us * 1000L};

	nanosleep(&ts, NULL);
}

/* Waits until *flag is set or ms pass; returns whether it was set. */
static bool wait_flag(atomic_int *flag, long ms)
{
	long long end = mono_ms() + ms;

	while (!atomic_load(flag)) {
		if (mono_ms() > end)
			return false;
		sleep_ms(1);
	}
	return true;
}

static void post(const char *sid, const char *body, struct mcp_http_resp *resp)
{
	struct mcp_http_req req = {
	    .tenant = TENANT,
	    .session_id = sid,
	    .body = body,
	    .body_len = strlen(body),
	};

	mcp_http_post(srv, &req, resp);
}

/*
 * Everything an answer carries: its JSON body, or its SSE stream read
 * until it ends (at most ms), chunk bytes at a time. Caller frees.
 */
static char *drain(struct mcp_http_resp *resp, size_t chunk, long ms)
{
	long long end = mono_ms() + ms;
	size_t len = 0, cap = 4096;
	char *out = malloc(cap);

	if (!out)
		return NULL;
	out[0] = '\0';
	if (resp->body) {
		free(out);
		return strdup(resp->body);
	}
	while (resp->stream && mono_ms() < end) {
		ssize_t n;

		if (cap - len < chunk + 1) {
			char *p = realloc(out, cap * 2 + chunk);

			if (!p)
				break;
			out = p;
			cap = cap * 2 + chunk;
		}
		n = mcp_stream_read(resp->stream, out + len, chunk, 100);
		if (n < 0)
			break;
		len += (size_t)n;
		out[len] = '\0';
	}
	return out;
}

/*
 * Starts a session speaking version; its id goes to sid (80 bytes).
 * Returns whether it was created.
 */
static bool initialize_v(char *sid, const char *version)
{
	struct mcp_http_resp resp;
	char body[256];
	bool good;

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
	         "\"params\":{\"protocolVersion\":\"%s\","
	         "\"capabilities\":{},\"clientInfo\":{\"name\":\"t\","
	         "\"version\":\"1\"}}}",
	         version);
	post(NULL, body, &resp);
	good = resp.status == 200 && resp.session_id[0];
	snprintf(sid, 80, "%s", resp.session_id);
	mcp_http_resp_finish(&resp);
	return good;
}

static bool initialize(char *sid)
{
	return initialize_v(sid, "2025-06-18");
}

/* Sends one request and returns its HTTP status; body kept if out. */
static int request(const char *sid, const char *body, char **out)
{
	struct mcp_http_resp resp;
	int status;

	post(sid, body, &resp);
	status = resp.status;
	if (out)
		*out = drain(&resp, 65536, 10000);
	mcp_http_resp_finish(&resp);
	return status;
}

static void cancel(const char *sid, int id)
{
	char body[160];

	snprintf(body, sizeof(body),
	         "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
	         "\"params\":{\"requestId\":%d}}",
	         id);
	request(sid, body, NULL);
}

static void delete_session(const char *sid)
{
	struct mcp_http_req req = {.tenant = TENANT, .session_id = sid};
	struct mcp_http_resp resp;

	mcp_http_delete(srv, &req, &resp);
	mcp_http_resp_finish(&resp);
}

static char *call_body(int id, const char *tool, const char *args)
{
	char *b = malloc(256 + strlen(args));

	if (b)
		snprintf(b, 256 + strlen(args),
		         "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":"
		         "\"tools/call\",\"params\":{\"name\":\"%s\","
		         "\"arguments\":%s,\"_meta\":{\"progressToken\":%d}}}",
		         id, tool, args, id);
	return b;
}

/* Answers ping on sid; returns the milliseconds it took (-1: failed). */
static long long timed_ping(const char *sid)
{
	long long t0 = mono_ms();
	char *out = NULL;
	int st = request(
	    sid, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}", &out);
	bool good = st == 200 && out && strstr(out, "\"result\":{}");

	free(out);
	return good ? mono_ms() - t0 : -1;
}

static long long timed_list(const char *sid)
{
	long long t0 = mono_ms();
	char *out = NULL;
	int st = request(
	    sid, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/list\"}",
	    &out);
	bool good = st == 200 && out && strstr(out, "\"block\"");

	free(out);
	return good ? mono_ms() - t0 : -1;
}

/* ------------------------------------------------------------------ */
/* tool "block": its cancel hook blocks until the test releases it */

static struct {
	atomic_int running;  /* the tool is in its handler */
	atomic_int entered;  /* the hook started */
	atomic_int release;  /* the test lets the hook return */
	atomic_int returned; /* the hook returned */
	atomic_int done;     /* the tool returned */
} blk;

static void block_hook(void *arg)
{
	(void)arg;
	atomic_store(&blk.entered, 1);
	/* At most 10 s, so a broken lock fails the test instead of hanging. */
	wait_flag(&blk.release, 10000);
	atomic_store(&blk.returned, 1);
}

static cJSON *block_tool(void *data, struct mcp_call *call, const cJSON *args)
{
	long long end = mono_ms() + 20000;

	(void)data;
	(void)args;
	mcp_call_on_cancel(call, block_hook, NULL);
	/* Something other than the result: the POST is answered as SSE. */
	mcp_call_log(call, MCP_LOG_INFO, "test", cJSON_CreateString("started"));
	atomic_store(&blk.running, 1);
	while (!mcp_call_cancelled(call) && mono_ms() < end)
		sleep_ms(2);
	mcp_call_on_cancel(call, NULL, NULL);
	atomic_store(&blk.done, 1);
	return mcp_text_result("cancelled or timed out", false);
}

struct bg_post {
	pthread_t th;
	char sid[80];
	char *body;
	struct mcp_http_resp resp;
	char *out;
};

static void *bg_post_main(void *arg)
{
	struct bg_post *p = arg;

	post(p->sid, p->body, &p->resp);
	p->out = drain(&p->resp, 65536, 30000);
	mcp_http_resp_finish(&p->resp);
	return NULL;
}

struct bg_cancel {
	pthread_t th;
	char sid[80];
	int id; /* > 0: notifications/cancelled; 0: DELETE the session */
	atomic_int finished;
};

static void *bg_cancel_main(void *arg)
{
	struct bg_cancel *c = arg;

	if (c->id > 0)
		cancel(c->sid, c->id);
	else
		delete_session(c->sid);
	atomic_store(&c->finished, 1);
	return NULL;
}

/*
 * A call on session A whose cancel hook blocks for a second (the hook runs
 * on the thread that cancels: by notifications/cancelled, or by DELETE of
 * the session) while session B is served.
 */
static void test_blocking_hook(bool by_delete)
{
	const char *how = by_delete ? "DELETE" : "notifications/cancelled";
	struct bg_post call = {.body = call_body(7, "block", "{}")};
	struct bg_cancel cn = {.id = by_delete ? 0 : 7};
	char sid_b[80], sid_c[80];
	long long t_hook, ping_ms, list_ms, init_ms, t0;
	bool still_blocked;

	memset(&blk, 0, sizeof(blk));
	ok(initialize(call.sid) && initialize(sid_b), "%s: two sessions", how);
	snprintf(cn.sid, sizeof(cn.sid), "%s", call.sid);
	pthread_create(&call.th, NULL, bg_post_main, &call);
	ok(wait_flag(&blk.running, 10000), "%s: the tool runs", how);
	pthread_create(&cn.th, NULL, bg_cancel_main, &cn);
	ok(wait_flag(&blk.entered, 10000), "%s: the cancel hook started", how);
	t_hook = mono_ms();

	ping_ms = timed_ping(sid_b);
	list_ms = timed_list(sid_b);
	t0 = mono_ms();
	ok(initialize(sid_c), "%s: a new session while the hook blocks", how);
	init_ms = mono_ms() - t0;
	still_blocked = !atomic_load(&blk.returned);
	ok(still_blocked,
	   "%s: other sessions were answered while the hook blocked", how);
	ok(ping_ms >= 0 && ping_ms < QUICK_MS,
	   "%s: ping on another session in %lld ms (< %d)", how, ping_ms,
	   QUICK_MS);
	ok(list_ms >= 0 && list_ms < QUICK_MS,
	   "%s: tools/list on another session in %lld ms (< %d)", how, list_ms,
	   QUICK_MS);
	ok(init_ms < QUICK_MS, "%s: initialize in %lld ms (< %d)", how, init_ms,
	   QUICK_MS);
	ok(!atomic_load(&cn.finished),
	   "%s: the cancelling request waits for its hook", how);

	/* The hook blocks for a second in all. */
	while (mono_ms() - t_hook < 1000)
		sleep_ms(10);
	atomic_store(&blk.release, 1);
	pthread_join(cn.th, NULL);
	pthread_join(call.th, NULL);
	/* After DELETE the call's stream ends before its tool returns. */
	ok(atomic_load(&blk.returned) && wait_flag(&blk.done, 10000),
	   "%s: the hook returned, then the tool", how);
	ok(call.out && strstr(call.out, "\"started\"") &&
	       !strstr(call.out, "\"result\""),
	   "%s: the cancelled call's stream has its log and no result", how);
	free(call.out);
	free(call.body);
	delete_session(sid_b);
	delete_session(sid_c);
	if (!by_delete)
		delete_session(call.sid);
}

/* ------------------------------------------------------------------ */
/* tool "big": a 2 MB text result */

static const char pattern[] = "0123456789abcdef";

static cJSON *big_tool(void *data, struct mcp_call *call, const cJSON *args)
{
	char *text = malloc(BIG_BYTES + 1);
	cJSON *r;

	(void)data;
	if (!text)
		return NULL;
	for (size_t i = 0; i < BIG_BYTES; i++)
		text[i] = pattern[i % 16];
	text[BIG_BYTES] = '\0';
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(args, "sse")))
		mcp_call_log(call, MCP_LOG_INFO, "test",
		             cJSON_CreateString("big"));
	r = mcp_text_result(text, false);
	free(text);
	return r;
}

/* Whether out holds the 2 MB text intact. */
static bool big_intact(const char *out)
{
	const char *p = out ? strstr(out, "\"text\":\"0123") : NULL;

	if (!p)
		return false;
	p += 8;
	for (size_t i = 0; i < BIG_BYTES; i++) {
		if (p[i] != pattern[i % 16])
			return false;
	}
	return p[BIG_BYTES] == '"';
}

struct big_reader {
	char sid[80];
	atomic_int stop;
	atomic_int results, intact;
};

/* Calls "big" over and over, reading each answer 4 KiB at a time. */
static void *big_reader_main(void *arg)
{
	struct big_reader *br = arg;

	for (int id = 100; !atomic_load(&br->stop) && id < 110; id++) {
		char *body =
		    call_body(id, "big", id % 2 ? "{\"sse\":true}" : "{}");
		struct mcp_http_resp resp;
		char *out;

		post(br->sid, body, &resp);
		out = drain(&resp, 4096, 30000);
		mcp_http_resp_finish(&resp);
		atomic_fetch_add(&br->results, 1);
		if (big_intact(out))
			atomic_fetch_add(&br->intact, 1);
		free(out);
		free(body);
	}
	return NULL;
}

static void test_big_result(void)
{
	struct big_reader br = {.results = 0};
	char sid_b[80];
	long long worst = 0, t_end;
	int pings = 0, failed = 0;
	pthread_t th;

	ok(initialize(br.sid) && initialize(sid_b), "big: two sessions");
	pthread_create(&th, NULL, big_reader_main, &br);
	/* Ping session B while A's results are built and streamed. */
	t_end = mono_ms() + 3000;
	while (mono_ms() < t_end && atomic_load(&br.results) < 4) {
		long long ms = timed_ping(sid_b);

		if (ms < 0)
			failed++;
		else if (ms > worst)
			worst = ms;
		pings++;
		sleep_ms(2);
	}
	atomic_store(&br.stop, 1);
	pthread_join(th, NULL);
	ok(pings > 0 && failed == 0, "big: %d pings answered meanwhile", pings);
	ok(worst < QUICK_MS, "big: the slowest ping took %lld ms (< %d)", worst,
	   QUICK_MS);
	ok(br.results > 0 && br.intact == br.results,
	   "big: %d of %d 2 MB results arrived intact (JSON and SSE)",
	   atomic_load(&br.intact), atomic_load(&br.results));
	delete_session(sid_b);
	delete_session(br.sid);
}

/*
 * A reader that has begun copying a 2 MB event out keeps it whole while
 * the session is deleted under it, and other sessions are served while it
 * pauses mid-event.
 */
static void test_reader_outlives_session(void)
{
	char sid[80], sid_b[80], chunk[4096];
	char *body = call_body(9, "big", "{\"sse\":true}");
	struct mcp_http_resp resp;
	size_t total = 0;
	ssize_t n;
	long long ping_ms;
	bool ended = false;

	ok(initialize(sid) && initialize(sid_b), "reader: two sessions");
	post(sid, body, &resp);
	ok(resp.stream != NULL, "reader: the big call answers as SSE");
	/* Up to the start of the result event. */
	while (resp.stream &&
	       (n = mcp_stream_read(resp.stream, chunk, sizeof(chunk) - 1,
	                            5000)) > 0) {
		chunk[n] = '\0';
		total += (size_t)n;
		if (strstr(chunk, "\"result\""))
			break;
	}
	ping_ms = timed_ping(sid_b);
	ok(ping_ms >= 0 && ping_ms < QUICK_MS,
	   "reader: ping in %lld ms while a 2 MB event is half read", ping_ms);
	delete_session(sid);
	for (long long end = mono_ms() + 10000;
	     resp.stream && mono_ms() < end;) {
		n = mcp_stream_read(resp.stream, chunk, sizeof(chunk), 1000);
		if (n < 0) {
			ended = true;
			break;
		}
		total += (size_t)n;
	}
	ok(ended && total > BIG_BYTES,
	   "reader: the event was read to its end after DELETE (%zu bytes), "
	   "then the stream ended",
	   total);
	mcp_http_resp_finish(&resp);
	free(body);
	delete_session(sid_b);
}

/* ------------------------------------------------------------------ */
/* tool "race": unregistering while a cancellation arrives */

struct race_state {
	atomic_int running;
	atomic_int runs;
	unsigned hook_us;
};

static struct {
	atomic_int registered;   /* the tool registered its hook */
	atomic_int cancel_sent;  /* the cancelling request returned */
	atomic_int delay_us;     /* how long the tool waits to unregister */
	atomic_int running_seen; /* the hook ran after unregister returned */
	atomic_int late_runs;    /* the hook started after unregister */
	atomic_int ran, not_ran;
} race;

static void race_hook(void *arg)
{
	struct race_state *h = arg;

	atomic_store(&h->running, 1);
	sleep_us(h->hook_us);
	atomic_fetch_add(&h->runs, 1);
	atomic_store(&h->running, 0);
}

static cJSON *race_tool(void *data, struct mcp_call *call, const cJSON *args)
{
	/* Heap, so a hook running after free is a use-after-free to ASan. */
	struct race_state *h = calloc(1, sizeof(*h));
	const cJSON *us = cJSON_GetObjectItemCaseSensitive(args, "hook_us");
	int runs;

	(void)data;
	if (!h)
		return NULL;
	h->hook_us = cJSON_IsNumber(us) ? (unsigned)us->valueint : 0;
	mcp_call_on_cancel(call, race_hook, h);
	mcp_call_log(call, MCP_LOG_INFO, "test", NULL);
	atomic_store(&race.registered, 1);
	sleep_us(atomic_load(&race.delay_us));
	mcp_call_on_cancel(call, NULL, NULL);
	if (atomic_load(&h->running))
		atomic_fetch_add(&race.running_seen, 1);
	runs = atomic_load(&h->runs);
	wait_flag(&race.cancel_sent, 10000);
	if (atomic_load(&h->runs) != runs)
		atomic_fetch_add(&race.late_runs, 1);
	atomic_fetch_add(runs ? &race.ran : &race.not_ran, 1);
	free(h);
	return mcp_text_result("done", false);
}

static void test_unregister_race(void)
{
	char sid[80], args[64];
	unsigned seed = 12345;
	int rounds = 0, id = 1000;
	long long end = mono_ms() + 3000;

	memset(&race, 0, sizeof(race));
	ok(initialize(sid), "race: a session");
	while (rounds < 300 && mono_ms() < end) {
		struct mcp_http_resp resp;
		char *body, *out;

		atomic_store(&race.registered, 0);
		atomic_store(&race.cancel_sent, 0);
		atomic_store(&race.delay_us, (int)(rand_r(&seed) % 400));
		snprintf(args, sizeof(args), "{\"hook_us\":%u}",
		         rand_r(&seed) % 400);
		body = call_body(++id, "race", args);
		post(sid, body, &resp);
		if (!wait_flag(&race.registered, 10000))
			break;
		sleep_us(rand_r(&seed) % 300);
		cancel(sid, id);
		atomic_store(&race.cancel_sent, 1);
		out = drain(&resp, 65536, 10000);
		mcp_http_resp_finish(&resp);
		free(out);
		free(body);
		rounds++;
	}
	ok(rounds >= 20, "race: %d rounds of unregister against cancel",
	   rounds);
	is_int(atomic_load(&race.running_seen), 0,
	       "race: the hook never ran after unregister returned");
	is_int(atomic_load(&race.late_runs), 0,
	       "race: the hook never started after unregister returned");
	is_int(atomic_load(&race.ran) + atomic_load(&race.not_ran), rounds,
	       "race: every round accounted for");
	printf("# hook ran first in %d rounds, unregister first in %d\n",
	       atomic_load(&race.ran), atomic_load(&race.not_ran));
	delete_session(sid);
}

/* ------------------------------------------------------------------ */
/* tool "nested": a hook that calls back into its own call */

static struct {
	atomic_int hook1, hook1_saw_cancel, hook2, hook2_before_return;
	atomic_int running;
} nest;

struct nest_arg {
	struct mcp_call *call;
};

static void nest_hook1(void *arg)
{
	struct nest_arg *a = arg;

	atomic_store(&nest.hook1_saw_cancel, mcp_call_cancelled(a->call));
	/* Unregistering from inside the hook returns at once. */
	mcp_call_on_cancel(a->call, NULL, NULL);
	atomic_store(&nest.hook1, 1);
}

static void nest_hook2(void *arg)
{
	(void)arg;
	atomic_store(&nest.hook2, 1);
}

static cJSON *nest_tool(void *data, struct mcp_call *call, const cJSON *args)
{
	struct nest_arg a = {call};
	long long end = mono_ms() + 10000;

	(void)data;
	(void)args;
	mcp_call_on_cancel(call, nest_hook1, &a);
	atomic_store(&nest.running, 1);
	while (!mcp_call_cancelled(call) && mono_ms() < end)
		sleep_ms(1);
	mcp_call_on_cancel(call, NULL, NULL);
	/* Registered on a cancelled call: runs before this returns. */
	mcp_call_on_cancel(call, nest_hook2, NULL);
	atomic_store(&nest.hook2_before_return, atomic_load(&nest.hook2));
	mcp_call_on_cancel(call, NULL, NULL);
	return mcp_text_result("done", false);
}

static void test_nested_hook(void)
{
	struct bg_post call = {.body = call_body(5, "nested", "{}")};

	memset(&nest, 0, sizeof(nest));
	ok(initialize(call.sid), "nested: a session");
	pthread_create(&call.th, NULL, bg_post_main, &call);
	ok(wait_flag(&nest.running, 10000), "nested: the tool runs");
	cancel(call.sid, 5);
	pthread_join(call.th, NULL);
	ok(nest.hook1 && nest.hook1_saw_cancel,
	   "nested: the hook ran, saw its call cancelled and unregistered "
	   "itself");
	ok(nest.hook2_before_return,
	   "nested: a hook registered on a cancelled call ran at once");
	free(call.out);
	free(call.body);
	delete_session(call.sid);
}

/* ------------------------------------------------------------------ */
/* stress: everything at once from many threads */

#define SLOTS 4
#define WORKERS 6

enum {
	OP_INIT,
	OP_CALL,
	OP_CANCEL,
	OP_PING,
	OP_GET,
	OP_DELETE,
	OP_BATCH,
	OP_LEGACY,
	N_OPS
};

static struct {
	pthread_mutex_t lock;
	char sid[SLOTS][80];
	int last_id[SLOTS];
	atomic_int next_id;
	atomic_int stop;
	atomic_int ops[N_OPS];
	atomic_int hooks_run, tools_run;
} sx;

struct work_hook {
	atomic_int runs;
	unsigned us;
};

static void work_hook(void *arg)
{
	struct work_hook *h = arg;

	sleep_us(h->us);
	atomic_fetch_add(&h->runs, 1);
	atomic_fetch_add(&sx.hooks_run, 1);
}

/* A tool that does a bit of everything a real one does. */
static cJSON *work_tool(void *data, struct mcp_call *call, const cJSON *args)
{
	const cJSON *seed_j = cJSON_GetObjectItemCaseSensitive(args, "seed");
	unsigned seed = cJSON_IsNumber(seed_j) ? (unsigned)seed_j->valueint : 1;
	struct work_hook *h = calloc(1, sizeof(*h));
	long long end = mono_ms() + rand_r(&seed) % 30;

	(void)data;
	if (!h)
		return NULL;
	h->us = rand_r(&seed) % 2000;
	atomic_fetch_add(&sx.tools_run, 1);
	if (rand_r(&seed) % 4)
		mcp_call_on_cancel(call, work_hook, h);
	if (rand_r(&seed) % 2)
		mcp_call_progress(call, 1, 2, "half");
	if (rand_r(&seed) % 3 == 0)
		mcp_call_log(call, MCP_LOG_WARNING, "work",
		             cJSON_CreateString("working"));
	if (rand_r(&seed) % 8 == 0) {
		cJSON *res = NULL, *err = NULL;
		int r =
		    mcp_call_request(call, "roots/list", NULL, 20, &res, &err);

		(void)r;
		cJSON_Delete(res);
		cJSON_Delete(err);
	}
	if (rand_r(&seed) % 10 == 0)
		mcp_call_close_stream(call, 100);
	while (mono_ms() < end && !mcp_call_cancelled(call))
		sleep_ms(1);
	mcp_call_on_cancel(call, NULL, NULL);
	free(h);
	return rand_r(&seed) % 16 ? mcp_text_result("worked", false) : NULL;
}

static const char *const versions[] = {"2025-11-25", "2025-06-18",
                                       "2025-03-26"};

static void stress_call(unsigned *seed, int slot, const char *sid)
{
	int id = atomic_fetch_add(&sx.next_id, 1);
	char args[48], *body;
	struct mcp_http_resp resp;

	snprintf(args, sizeof(args), "{\"seed\":%u}", rand_r(seed));
	body = call_body(id, "work", args);
	pthread_mutex_lock(&sx.lock);
	sx.last_id[slot] = id;
	pthread_mutex_unlock(&sx.lock);
	post(sid, body, &resp);
	/* Sometimes read it all, sometimes leave early. */
	if (resp.stream && rand_r(seed) % 3) {
		char buf[512];
		long long end = mono_ms() + 2000;

		while (mono_ms() < end &&
		       mcp_stream_read(resp.stream, buf, sizeof(buf), 50) >= 0)
			;
	}
	mcp_http_resp_finish(&resp);
	free(body);
}

/* The standalone stream, or a resumption of some stream of the session. */
static void stress_get(unsigned *seed, const char *sid)
{
	char last[32];
	struct mcp_http_req req = {.tenant = TENANT, .session_id = sid};
	struct mcp_http_resp resp;
	char buf[256];

	if (rand_r(seed) % 2) {
		snprintf(last, sizeof(last), "%u_%u", 1 + rand_r(seed) % 4,
		         rand_r(seed) % 3);
		req.last_event_id = last;
	}
	mcp_http_get(srv, &req, &resp);
	if (resp.stream)
		(void)mcp_stream_read(resp.stream, buf, sizeof(buf), 20);
	mcp_http_resp_finish(&resp);
}

/*
 * A legacy HTTP+SSE session: a call posted to it, maybe cancelled, then
 * the stream closed, which ends the session and cancels what still runs.
 */
static void stress_legacy(unsigned *seed)
{
	struct mcp_http_req req = {.tenant = TENANT};
	struct mcp_http_resp sse, resp;
	int id = atomic_fetch_add(&sx.next_id, 1);
	char args[48], sid[80], buf[1024], *body, *p;
	ssize_t n;

	mcp_http_sse_open(srv, &req, "/messages", &sse);
	if (!sse.stream) {
		mcp_http_resp_finish(&sse);
		return;
	}
	n = mcp_stream_read(sse.stream, buf, sizeof(buf) - 1, 1000);
	buf[n > 0 ? n : 0] = '\0';
	p = strstr(buf, "sessionId=");
	snprintf(sid, sizeof(sid), "%.64s", p ? p + 10 : "");
	req.session_id = sid;
	snprintf(args, sizeof(args), "{\"seed\":%u}", rand_r(seed));
	body = call_body(id, "work", args);
	req.body = body;
	req.body_len = strlen(body);
	mcp_http_sse_post(srv, &req, &resp);
	mcp_http_resp_finish(&resp);
	free(body);
	if (rand_r(seed) % 2) {
		char c[160];

		snprintf(c, sizeof(c),
		         "{\"jsonrpc\":\"2.0\",\"method\":"
		         "\"notifications/cancelled\",\"params\":"
		         "{\"requestId\":%d}}",
		         id);
		req.body = c;
		req.body_len = strlen(c);
		mcp_http_sse_post(srv, &req, &resp);
		mcp_http_resp_finish(&resp);
	}
	for (int i = rand_r(seed) % 4; i > 0; i--)
		(void)mcp_stream_read(sse.stream, buf, sizeof(buf), 10);
	mcp_http_resp_finish(&sse);
}

static void stress_op(unsigned *seed)
{
	int slot = (int)(rand_r(seed) % SLOTS), op, last;
	char sid[80];

	pthread_mutex_lock(&sx.lock);
	snprintf(sid, sizeof(sid), "%s", sx.sid[slot]);
	last = sx.last_id[slot];
	pthread_mutex_unlock(&sx.lock);
	op = sid[0] ? 1 + (int)(rand_r(seed) % (N_OPS - 1)) : OP_INIT;
	atomic_fetch_add(&sx.ops[op], 1);
	switch (op) {
	case OP_INIT:
		if (initialize_v(sid, versions[rand_r(seed) % 3])) {
			pthread_mutex_lock(&sx.lock);
			snprintf(sx.sid[slot], 80, "%s", sid);
			pthread_mutex_unlock(&sx.lock);
		}
		break;
	case OP_CALL:
		stress_call(seed, slot, sid);
		break;
	case OP_CANCEL:
		cancel(sid, last);
		break;
	case OP_PING:
		request(sid,
		        "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}",
		        NULL);
		break;
	case OP_GET:
		stress_get(seed, sid);
		break;
	case OP_DELETE:
		if (rand_r(seed) % 2) {
			delete_session(sid);
			pthread_mutex_lock(&sx.lock);
			if (strcmp(sx.sid[slot], sid) == 0)
				sx.sid[slot][0] = '\0';
			pthread_mutex_unlock(&sx.lock);
		}
		break;
	case OP_BATCH:
		request(sid,
		        "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"},"
		        "{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"id\":[]}]",
		        NULL);
		break;
	case OP_LEGACY:
		stress_legacy(seed);
		break;
	}
}

static void *stress_main(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;

	while (!atomic_load(&sx.stop))
		stress_op(&seed);
	return NULL;
}

static void test_stress(void)
{
	pthread_t th[WORKERS];
	struct mcp_stats st;
	long long t0 = mono_ms();
	unsigned left;

	memset(&sx, 0, sizeof(sx));
	pthread_mutex_init(&sx.lock, NULL);
	atomic_store(&sx.next_id, 10000);
	for (uintptr_t i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, stress_main, (void *)(i + 1));
	sleep_ms(3000);
	atomic_store(&sx.stop, 1);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	printf("# %lld ms: %d inits, %d calls, %d cancels, %d pings, %d "
	       "gets, %d deletes, %d batches, %d legacy sessions; %d tools "
	       "ran, %d hooks\n",
	       mono_ms() - t0, sx.ops[OP_INIT], sx.ops[OP_CALL],
	       sx.ops[OP_CANCEL], sx.ops[OP_PING], sx.ops[OP_GET],
	       sx.ops[OP_DELETE], sx.ops[OP_BATCH], sx.ops[OP_LEGACY],
	       sx.tools_run, sx.hooks_run);
	ok(sx.ops[OP_CALL] > 0 && sx.ops[OP_CANCEL] > 0 &&
	       sx.ops[OP_DELETE] > 0 && sx.ops[OP_GET] > 0 &&
	       sx.ops[OP_LEGACY] > 0 && sx.tools_run > 0,
	   "stress: every kind of operation ran");
	left = mcp_server_drain(srv, 30000);
	is_int(left, 0, "stress: every call ended");
	mcp_server_close_sessions(srv);
	mcp_server_stats(srv, &st);
	is_int(st.sessions, 0, "stress: no session left");
	is_int(st.streams_open, 0, "stress: no stream left open");
	pthread_mutex_destroy(&sx.lock);
}

/* ------------------------------------------------------------------ */

static const struct tool_impl tools[] = {
    {.name = "block",
     .description = "waits for cancellation; its hook blocks",
     .input_schema = "{\"type\":\"object\"}",
     .call = block_tool},
    {.name = "big",
     .description = "a 2 MB result",
     .input_schema = "{\"type\":\"object\"}",
     .call = big_tool},
    {.name = "race",
     .description = "unregisters while a cancellation arrives",
     .input_schema = "{\"type\":\"object\"}",
     .call = race_tool},
    {.name = "nested",
     .description = "a hook that calls back into its call",
     .input_schema = "{\"type\":\"object\"}",
     .call = nest_tool},
    {.name = "work",
     .description = "a bit of everything",
     .input_schema = "{\"type\":\"object\"}",
     .call = work_tool},
};

int main(void)
{
	log_set_level(LOG_LEVEL_WARN);
	cfg.max_json_depth = 64;
	cfg.session_idle_s = 600;
	cfg.max_sessions_per_tenant = 10000;
	cfg.keepalive_s = 2;
	cfg.max_inflight_per_session = 8;
	srv = mcp_server_create(&cfg);
	if (!ok(srv != NULL, "server created"))
		return tap_done();
	for (size_t i = 0; i < sizeof(tools) / sizeof(tools[0]); i++)
		mcp_server_add_tool(srv, &tools[i]);

	test_blocking_hook(false);
	test_blocking_hook(true);
	test_big_result();
	test_reader_outlives_session();
	test_nested_hook();
	test_unregister_race();
	test_stress();

	mcp_server_destroy(srv);
	return tap_done();
}
