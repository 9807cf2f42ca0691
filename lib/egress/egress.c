/* SPDX-License-Identifier: MIT */
/*
 * egress: the proxy, the per-run slots and the reading of the proxy's log;
 * see egress.h. eg->lock guards the slots, the open runs, the proxy's
 * state and the log reader; engine calls are made without it (a slot is
 * taken under the lock first, so no two runs open the same network).
 * start_lock makes proxy starts one at a time (eg_ensure_proxy).
 */
#include "egress/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"
#include "util/mono.h"
#include "util/stats.h"

#define EG_PROXY_UID 13    /* Debian's "proxy" user in the image */
#define EG_PORT 3128       /* Squid's http_port */
#define EG_SLOTS_MAX 1024  /* runs with network at once */
#define EG_OPEN_TRIES 16   /* slots tried when the engine has the subnet */
#define EG_READY_MS 15000  /* for Squid to accept connections */
#define EG_SETTLE_MS 150   /* for the last lines of a run to reach the log */
#define EG_LOG_CHUNK 65536 /* read at a time */
#define EG_LOG_TRUNCATE (8LL * 1024 * 1024)
#define EG_CONF_MAX 8192

struct egress_run {
	struct egress_run *next;
	unsigned slot;
	long long started_ms; /* wall clock: older log lines are not its */
	char net[96], subnet[24], gateway[16], proxy_ip[16], ip[16];
	char env_buf[4][48];
	const char *env[4];
	struct box_egress box;
	struct backend_egress_net bnet;
	struct egress_facts facts;
};

struct egress {
	const struct config *cfg;
	struct backend *be;
	char boot[17];
	char dir[PATH_MAX - 128], log_dir[PATH_MAX - 64],
	    policy_dir[PATH_MAX - 64];
	char proxy[96];
	unsigned base, n_slots, next_slot;
	unsigned char *used;
	struct egress_ports ports;

	pthread_mutex_t start_lock; /* one proxy start at a time */
	pthread_mutex_t lock;
	bool started;
	long long gen; /* proxy starts so far */
	struct egress_run *runs;
	int log_fd;
	long long log_off;
	char *log_buf; /* EG_LOG_CHUNK + EGRESS_LOG_LINE_MAX */
	size_t log_have;
	bool log_skipping; /* inside a line longer than the limit */
	struct stats_metric *m_requests, *m_bytes;
};

static void eg_ip(unsigned a, char out[16])
{
	snprintf(out, 16, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255,
	         (a >> 8) & 255, a & 255);
}

/* ---- files --------------------------------------------------------------- */

static int eg_write_file(const char *dir, const char *name, const char *text,
                         char *err, size_t errlen)
{
	char tmp[PATH_MAX + 32], path[PATH_MAX + 32];
	size_t n = strlen(text);
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
	          0644);
	if (fd < 0 || write(fd, text, n) != (ssize_t)n ||
	    fchmod(fd, 0644) < 0 || close(fd) < 0 || rename(tmp, path) < 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		unlink(tmp);
		snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

static int eg_mkdir(const char *path, mode_t mode, char *err, size_t errlen)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot make %s: %s", path,
		         strerror(errno));
		return -errno;
	}
	if (chmod(path, mode) < 0) {
		snprintf(err, errlen, "cannot set the mode of %s: %s", path,
		         strerror(errno));
		return -errno;
	}
	return 0;
}

struct eg_text {
	char *p;
	size_t len, at;
	bool full;
};

static void eg_put(struct eg_text *t, const char *s)
{
	size_t n = strlen(s);

	if (t->at + n >= t->len) {
		t->full = true;
		return;
	}
	memcpy(t->p + t->at, s, n + 1);
	t->at += n;
}

static void eg_host_line(void *arg, const struct egress_host *h)
{
	struct eg_text *t = arg;

	eg_put(t, h->ip);
	eg_put(t, " ");
	eg_put(t, h->name);
	eg_put(t, "\n");
}

/*
 * squid.conf: the ACL helper decides by the client's address, the name
 * and the port; whatever it allows must still not resolve to a private,
 * loopback, link-local or metadata address unless SANDBOX_EGRESS_PRIVATE
 * names it. No cache, no cache manager, no forwarding headers.
 */
static int eg_squid_conf(const struct config *cfg, char *buf, size_t len)
{
	struct eg_text t = {buf, len, 0, false};
	char priv[1024];
	size_t n = 0;

	buf[0] = '\0';
	for (const char *s = cfg->egress_private; *s && n + 1 < sizeof(priv);
	     s++)
		priv[n++] = *s == ',' ? ' ' : *s;
	priv[n] = '\0';
	eg_put(&t,
	       "# Written by mcp-sandboxd at start-up; do not edit.\n"
	       "http_port 3128\n"
	       "pid_filename none\n"
	       "pinger_enable off\n"
	       "cache deny all\n"
	       "cache_mem 0 MB\n"
	       "coredump_dir none\n"
	       "cache_log stdio:/egress/log/cache.log\n"
	       "logfile_rotate 0\n"
	       "buffered_logs off\n"
	       "logformat mcpsd %ts.%03tu %>a %rm %>rd %>rP %Ss %>Hs %<st "
	       "%>st %ea\n"
	       "access_log stdio:/egress/log/access.log mcpsd\n"
	       "hosts_file /egress/hosts\n"
	       "forwarded_for delete\n"
	       "via off\n"
	       "httpd_suppress_version_string on\n"
	       "external_acl_type mcpsd ttl=0 negative_ttl=0 children-max=8 "
	       "children-startup=2 %>a %DST %PORT "
	       "/usr/local/lib/mcpsd-egress/acl\n"
	       "acl mcpsd_allowed external mcpsd\n"
	       "acl mcpsd_refused dst 0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 "
	       "127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24 "
	       "192.168.0.0/16 198.18.0.0/15 224.0.0.0/3 ::/127 fc00::/7 "
	       "fe80::/10 ::ffff:0:0/96\n");
	if (priv[0]) {
		eg_put(&t, "acl mcpsd_private_ok dst ");
		eg_put(&t, priv);
		eg_put(&t, "\n");
	}
	eg_put(&t, "http_access deny manager\n"
	           "http_access deny !mcpsd_allowed\n");
	eg_put(&t, priv[0] ? "http_access deny mcpsd_refused "
	                     "!mcpsd_private_ok\n"
	                   : "http_access deny mcpsd_refused\n");
	eg_put(&t, "http_access allow mcpsd_allowed\n"
	           "http_access deny all\n");
	return t.full ? -ENOSPC : 0;
}

/* squid.conf, hosts, policy/ (emptied) and log/ (for the proxy's user). */
static int eg_prepare_dir(struct egress *eg, char *err, size_t errlen)
{
	char *conf = malloc(EG_CONF_MAX), *hosts = malloc(EG_CONF_MAX);
	struct eg_text t = {hosts, EG_CONF_MAX, 0, false};
	char path[PATH_MAX];
	int r;

	r = !conf || !hosts ? -ENOMEM : 0;
	if (r == 0)
		r = eg_mkdir(eg->dir, 0755, err, errlen);
	if (r == 0)
		r = eg_mkdir(eg->policy_dir, 0755, err, errlen);
	if (r == 0)
		r = eg_mkdir(eg->log_dir, 0700, err, errlen);
	if (r == 0 && chown(eg->log_dir, EG_PROXY_UID, EG_PROXY_UID) < 0) {
		log_warn("egress: cannot give %s to the proxy's user; "
		         "opening it to all",
		         eg->log_dir);
		r = eg_mkdir(eg->log_dir, 0777, err, errlen);
	}
	if (r == 0) {
		hosts[0] = '\0';
		r = egress_hosts_parse(eg->cfg->egress_hosts, eg_host_line, &t,
		                       err, errlen);
		if (r == 0 && t.full)
			r = -ENOSPC;
	}
	if (r == 0 && eg_squid_conf(eg->cfg, conf, EG_CONF_MAX) < 0)
		r = -ENOSPC;
	if (r == -ENOSPC || r == -ENOMEM)
		snprintf(err, errlen, "%s",
		         r == -ENOMEM ? "out of memory"
		                      : "SANDBOX_EGRESS_HOSTS or "
		                        "SANDBOX_EGRESS_PRIVATE is too long");
	if (r == 0)
		r = eg_write_file(eg->dir, "squid.conf", conf, err, errlen);
	if (r == 0)
		r = eg_write_file(eg->dir, "hosts", hosts, err, errlen);
	free(conf);
	free(hosts);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/access.log", eg->log_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/cache.log", eg->log_dir);
	unlink(path);
	return 0;
}

/* ---- the proxy ----------------------------------------------------------- */

/* Whether Squid wrote that it accepts connections (its cache.log). */
static bool eg_proxy_ready(const struct egress *eg)
{
	char path[PATH_MAX], buf[8192];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/cache.log", eg->log_dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return strstr(buf, "Accepting HTTP Socket connections") != NULL;
}

static int eg_proxy_start(struct egress *eg, char *err, size_t errlen)
{
	const struct backend_egress_proxy p = {
	    .name = eg->proxy,
	    .image = eg->cfg->egress_image,
	    .dir = eg->dir,
	    .log_dir = eg->log_dir,
	    .network = eg->cfg->egress_proxy_network,
	    .uid = EG_PROXY_UID,
	    .instance = eg->cfg->instance_name};
	char path[PATH_MAX];
	long long t0 = mono_ms();
	int r;

	r = eg_prepare_dir(eg, err, errlen);
	if (r < 0)
		return r;
	r = backend_egress_proxy_start(eg->be, &p, err, errlen);
	if (r < 0)
		return r;
	while (!eg_proxy_ready(eg)) {
		if (mono_ms() - t0 > EG_READY_MS) {
			snprintf(err, errlen,
			         "the egress proxy %s did not accept "
			         "connections within %d s; see %s/cache.log",
			         eg->proxy, EG_READY_MS / 1000, eg->log_dir);
			return -ETIMEDOUT;
		}
		usleep(50 * 1000);
	}
	snprintf(path, sizeof(path), "%s/access.log", eg->log_dir);
	pthread_mutex_lock(&eg->lock);
	if (eg->log_fd >= 0)
		close(eg->log_fd);
	/* Squid makes it at its first request: opened when it exists. */
	eg->log_fd = -1;
	eg->log_off = 0;
	eg->log_have = 0;
	eg->log_skipping = false;
	pthread_mutex_unlock(&eg->lock);
	log_info("egress: proxy %s started (%s), %u ms", eg->proxy,
	         eg->cfg->egress_image, (unsigned)(mono_ms() - t0));
	return 0;
}

/* ---- the log ------------------------------------------------------------- */

static void eg_on_entry(void *arg, const struct egress_log_entry *e)
{
	struct egress *eg = arg;
	const char *const verdict[] = {
	    e->verdict == EGRESS_ALLOWED ? "allowed" : "blocked", NULL};
	const char *const dir_in[] = {"in", NULL}, *const dir_out[] = {"out",
	                                                               NULL};

	stats_add(eg->m_requests, verdict, 1);
	stats_add(eg->m_bytes, dir_in, (double)e->bytes_in);
	stats_add(eg->m_bytes, dir_out, (double)e->bytes_out);
	for (struct egress_run *r = eg->runs; r; r = r->next)
		if (strcmp(r->ip, e->src) == 0 &&
		    e->time_ms + 1000 >= r->started_ms) {
			egress_facts_add(&r->facts, e);
			return;
		}
}

/* Reads what the proxy logged since the last call. Called with the lock. */
static void eg_drain(struct egress *eg)
{
	char path[PATH_MAX];

	if (eg->log_fd < 0) {
		snprintf(path, sizeof(path), "%s/access.log", eg->log_dir);
		eg->log_fd =
		    open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (eg->log_fd < 0)
			return;
	}
	for (;;) {
		ssize_t n = pread(eg->log_fd, eg->log_buf + eg->log_have,
		                  EG_LOG_CHUNK, (off_t)eg->log_off);
		size_t used, total;
		char *p = eg->log_buf;

		if (n <= 0)
			break;
		eg->log_off += n;
		total = eg->log_have + (size_t)n;
		if (eg->log_skipping) {
			char *nl = memchr(p, '\n', total);

			if (!nl) {
				eg->log_have = 0;
				continue;
			}
			eg->log_skipping = false;
			total -= (size_t)(nl + 1 - p);
			memmove(p, nl + 1, total);
		}
		used = egress_log_feed(p, total, eg_on_entry, eg);
		eg->log_have = total - used;
		memmove(p, p + used, eg->log_have);
		if (eg->log_have > EGRESS_LOG_LINE_MAX) {
			eg->log_have = 0;
			eg->log_skipping = true;
		}
	}
	/* Nobody is waiting for lines: start the file again when large. */
	if (!eg->runs && eg->log_off > EG_LOG_TRUNCATE && eg->log_have == 0 &&
	    ftruncate(eg->log_fd, 0) == 0)
		eg->log_off = 0;
}

/* ---- policy -------------------------------------------------------------- */

int egress_resolve(const struct config *cfg, const char *tenant,
                   const struct egress_list *asked, struct egress_list *out,
                   char *err, size_t errlen)
{
	struct egress_list *t = malloc(sizeof(*t));
	struct egress_ports ports;
	int r;

	if (!t) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	r = egress_ports_parse(cfg->egress_ports, &ports, err, errlen);
	if (r == 0)
		r = egress_tenant_list(cfg->egress_tenants, tenant, t, err,
		                       errlen);
	if (r == 0)
		r = egress_list_parse(cfg->egress_allow, "SANDBOX_EGRESS_ALLOW",
		                      t, err, errlen);
	else if (r > 0)
		r = 0;
	if (r == 0 && asked)
		r = egress_list_narrow(t, asked, &ports, out, err, errlen);
	else if (r == 0)
		*out = *t;
	free(t);
	return r;
}

/* ---- runs ---------------------------------------------------------------- */

static void eg_fill_run(struct egress *eg, struct egress_run *r, unsigned slot)
{
	unsigned net = eg->base + 8 * slot;

	r->slot = slot;
	snprintf(r->net, sizeof(r->net), "mcpsd-egress-%s-%u", eg->boot, slot);
	eg_ip(net, r->subnet);
	strncat(r->subnet, "/29", sizeof(r->subnet) - strlen(r->subnet) - 1);
	eg_ip(net + 1, r->gateway);
	eg_ip(net + 2, r->proxy_ip);
	eg_ip(net + 3, r->ip);
	r->box = (struct box_egress){r->net, r->ip};
	r->bnet =
	    (struct backend_egress_net){.name = r->net,
	                                .subnet = r->subnet,
	                                .gateway = r->gateway,
	                                .proxy = eg->proxy,
	                                .proxy_ip = r->proxy_ip,
	                                .instance = eg->cfg->instance_name};
	static const char *const names[] = {"HTTP_PROXY", "HTTPS_PROXY",
	                                    "http_proxy", "https_proxy"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(r->env_buf[i], sizeof(r->env_buf[i]),
		         "%s=http://%s:%d", names[i], r->proxy_ip, EG_PORT);
		r->env[i] = r->env_buf[i];
	}
}

/* Takes a free slot (rotating, so a slot is reused late). With the lock. */
static int eg_take_slot(struct egress *eg, unsigned *slot)
{
	for (unsigned i = 0; i < eg->n_slots; i++) {
		unsigned s = (eg->next_slot + i) % eg->n_slots;

		if (!eg->used[s]) {
			eg->used[s] = 1;
			eg->next_slot = s + 1;
			*slot = s;
			return 0;
		}
	}
	return -EAGAIN;
}

static void eg_give_slot(struct egress *eg, unsigned slot)
{
	pthread_mutex_lock(&eg->lock);
	eg->used[slot] = 0;
	pthread_mutex_unlock(&eg->lock);
}

/*
 * Starts the proxy when it is not running, or again when seen_gen (the
 * generation a caller found gone) is still the current one: of two runs
 * that find it gone, one starts it and the other uses that one. One start
 * at a time (start_lock, held across the engine calls; never with lock).
 */
static int eg_ensure_proxy(struct egress *eg, long long seen_gen, char *err,
                           size_t errlen)
{
	bool start;
	int r = 0;

	pthread_mutex_lock(&eg->start_lock);
	pthread_mutex_lock(&eg->lock);
	start = !eg->started || (seen_gen >= 0 && seen_gen == eg->gen);
	pthread_mutex_unlock(&eg->lock);
	if (start) {
		r = eg_proxy_start(eg, err, errlen);
		pthread_mutex_lock(&eg->lock);
		eg->started = r == 0;
		eg->gen++;
		pthread_mutex_unlock(&eg->lock);
	}
	pthread_mutex_unlock(&eg->start_lock);
	return r;
}

static long long eg_gen(struct egress *eg)
{
	long long g;

	pthread_mutex_lock(&eg->lock);
	g = eg->gen;
	pthread_mutex_unlock(&eg->lock);
	return g;
}

/* Opens a network for r on some free slot. */
static int eg_open_net(struct egress *eg, struct egress_run *r, char *err,
                       size_t errlen)
{
	bool restarted = false;
	long long gen;
	int rc = -EAGAIN;

	for (unsigned tries = 0; tries < EG_OPEN_TRIES; tries++) {
		unsigned slot;

		pthread_mutex_lock(&eg->lock);
		rc = eg_take_slot(eg, &slot);
		pthread_mutex_unlock(&eg->lock);
		if (rc < 0) {
			snprintf(err, errlen,
			         "all %u egress networks are in use by runs "
			         "with network; retry when one ends",
			         eg->n_slots);
			return rc;
		}
		eg_fill_run(eg, r, slot);
		gen = eg_gen(eg);
		rc = backend_egress_net_open(eg->be, &r->bnet, err, errlen);
		if (rc == 0)
			return 0;
		/* Keep a taken subnet marked: another daemon has it. */
		if (rc == -EADDRINUSE)
			continue;
		eg_give_slot(eg, slot);
		/* The proxy is gone (an engine restart): once more. */
		if (rc == -EIO && !restarted) {
			restarted = true;
			if (eg_ensure_proxy(eg, gen, err, errlen) < 0)
				return -EIO;
			continue;
		}
		return rc;
	}
	snprintf(err, errlen,
	         "no free egress network in SANDBOX_EGRESS_SUBNET=%s after %d "
	         "tries (the engine has networks there already); choose a "
	         "range the host does not use",
	         eg->cfg->egress_subnet, EG_OPEN_TRIES);
	return rc;
}

int egress_run_begin(struct egress *eg, const struct egress_list *list,
                     struct egress_run **out, char *err, size_t errlen)
{
	struct egress_run *r = calloc(1, sizeof(*r));
	char *policy = malloc(EGRESS_RULES_MAX * EGRESS_PORTS_MAX *
	                      (EGRESS_NAME_MAX + 10));
	size_t plen =
	    EGRESS_RULES_MAX * EGRESS_PORTS_MAX * (EGRESS_NAME_MAX + 10);
	struct timespec ts;
	int rc;

	*out = NULL;
	if (!r || !policy) {
		free(r);
		free(policy);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	r->started_ms = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	rc = eg_ensure_proxy(eg, -1, err, errlen);
	if (rc == 0)
		rc = eg_open_net(eg, r, err, errlen);
	if (rc < 0) {
		free(r);
		free(policy);
		return rc;
	}
	rc = egress_list_render(list, &eg->ports, policy, plen) < 0 ? -ENOSPC
	                                                            : 0;
	if (rc == 0)
		rc = eg_write_file(eg->policy_dir, r->ip, policy, err, errlen);
	free(policy);
	pthread_mutex_lock(&eg->lock);
	r->next = eg->runs;
	eg->runs = r;
	pthread_mutex_unlock(&eg->lock);
	*out = r;
	if (rc < 0) {
		egress_run_end(eg, r, NULL);
		*out = NULL;
		return rc;
	}
	return 0;
}

const struct box_egress *egress_run_box(const struct egress_run *r)
{
	return &r->box;
}

const char *const *egress_run_env(const struct egress_run *r, size_t *n)
{
	*n = 4;
	return r->env;
}

void egress_run_end(struct egress *eg, struct egress_run *r,
                    struct egress_facts *facts)
{
	char path[PATH_MAX];

	if (!r)
		return;
	/* The proxy logs a tunnel when it closes, just after the box. */
	pthread_mutex_lock(&eg->lock);
	eg_drain(eg);
	pthread_mutex_unlock(&eg->lock);
	usleep(EG_SETTLE_MS * 1000);
	snprintf(path, sizeof(path), "%s/%s", eg->policy_dir, r->ip);
	unlink(path);
	pthread_mutex_lock(&eg->lock);
	eg_drain(eg);
	for (struct egress_run **pp = &eg->runs; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	pthread_mutex_unlock(&eg->lock);
	if (facts)
		*facts = r->facts;
	backend_egress_net_close(eg->be, &r->bnet);
	eg_give_slot(eg, r->slot);
	free(r);
}

/* ---- the module ---------------------------------------------------------- */

int egress_create(const struct config *cfg, struct backend *be,
                  const char *boot, struct egress **out, char *err,
                  size_t errlen)
{
	struct egress *eg = calloc(1, sizeof(*eg));
	unsigned prefix;
	int r = 0;

	*out = NULL;
	if (!eg) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	eg->cfg = cfg;
	eg->be = be;
	eg->log_fd = -1;
	pthread_mutex_init(&eg->lock, NULL);
	pthread_mutex_init(&eg->start_lock, NULL);
	snprintf(eg->boot, sizeof(eg->boot), "%.16s", boot);
	if (strlen(cfg->sandbox_root) + 8 >= sizeof(eg->dir)) {
		snprintf(err, errlen, "SANDBOX_ROOT is too long for egress");
		r = -ENAMETOOLONG;
		goto fail;
	}
	snprintf(eg->dir, sizeof(eg->dir), "%s/egress", cfg->sandbox_root);
	snprintf(eg->policy_dir, sizeof(eg->policy_dir), "%s/policy", eg->dir);
	snprintf(eg->log_dir, sizeof(eg->log_dir), "%s/log", eg->dir);
	snprintf(eg->proxy, sizeof(eg->proxy), "mcpsd-egress-%s",
	         cfg->instance_name);
	r = egress_ports_parse(cfg->egress_ports, &eg->ports, err, errlen);
	if (r == 0)
		r = egress_subnet_parse(cfg->egress_subnet, &eg->base, &prefix,
		                        err, errlen);
	if (r < 0)
		goto fail;
	eg->n_slots = 1u << (29 - prefix);
	if (eg->n_slots > EG_SLOTS_MAX)
		eg->n_slots = EG_SLOTS_MAX;
	eg->used = calloc(eg->n_slots, 1);
	eg->log_buf = malloc(EG_LOG_CHUNK + EGRESS_LOG_LINE_MAX + 1);
	if (!eg->used || !eg->log_buf) {
		snprintf(err, errlen, "out of memory");
		r = -ENOMEM;
		goto fail;
	}
	*out = eg;
	return 0;
fail:
	egress_destroy(eg);
	return r;
}

void egress_destroy(struct egress *eg)
{
	if (!eg)
		return;
	if (eg->started)
		backend_egress_proxy_stop(eg->be, eg->proxy);
	if (eg->log_fd >= 0)
		close(eg->log_fd);
	free(eg->used);
	free(eg->log_buf);
	pthread_mutex_destroy(&eg->lock);
	pthread_mutex_destroy(&eg->start_lock);
	free(eg);
}

void egress_stats(struct egress *eg, struct stats *s)
{
	static const char *const verdict[] = {"verdict", NULL};
	static const char *const dir[] = {"direction", NULL};

	eg->m_requests = stats_counter(
	    s, "mcpsd_egress_requests_total",
	    "Requests of runs through the egress proxy, allowed or blocked",
	    verdict);
	eg->m_bytes = stats_counter(
	    s, "mcpsd_egress_bytes_total",
	    "Bytes through the egress proxy: in (to boxes), out (from boxes)",
	    dir);
}
