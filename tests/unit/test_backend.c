/* SPDX-License-Identifier: MIT */
/*
 * test_backend: the registry of backends (chosen by name, an unknown name's
 * message, the capability bits of each backend and the operations each
 * bit promises), backend_configure with each backend's own configure hook
 * (the Swarm rules: SWARM_CONSTRAINTS, SANDBOX_RUNTIME; what a setting
 * needs from the chosen backend: SANDBOX_ALLOW_NETWORK, MCP_REPLICA_NAME),
 * the Docker backend's hand-over of a directory to a box, done with
 * real mounts in a scratch directory when this process may mount, and its
 * warm channel socket (SANDBOX_WARM_CHANNEL; the peer's cgroup check).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/docker/docker_channel.h"
#include "backend/docker/docker_handover.h"
#include "backend/swarm/swarm_spec.h"
#include "config/config.h"
#include "tap.h"

/* What a run of check() sets; each is unset first. */
static const char *const vars[] = {"SANDBOX_BACKEND",
                                   "SWARM_CONSTRAINTS",
                                   "SANDBOX_RUNTIME",
                                   "SANDBOX_ALLOW_NETWORK",
                                   "SANDBOX_PACKAGES",
                                   "MCP_REPLICA_NAME",
                                   "STORE_URL",
                                   "SANDBOX_WARM_CHANNEL",
                                   NULL};

/*
 * Loads the settings given as NAME, value pairs (NULL-terminated) over the
 * defaults, then backend_configure: its result; a failure to load is -1000.
 */
static int check(char *err, size_t errlen, ...)
{
	struct config c;
	va_list ap;
	const char *k;
	int rc;

	for (size_t i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	va_start(ap, errlen);
	while ((k = va_arg(ap, const char *)))
		setenv(k, va_arg(ap, const char *), 1);
	va_end(ap);
	err[0] = '\0';
	if (config_load(&c, NULL, err, errlen) < 0) {
		printf("# config_load: %s\n", err);
		config_finish(&c);
		return -1000;
	}
	rc = backend_configure(&c, err, errlen);
	config_finish(&c);
	return rc;
}

static void test_registry(void)
{
	const struct backend_impl *d = backend_find("docker");
	const struct backend_impl *s = backend_find("swarm");
	char names[128];
	size_t n = 0;

	ok(d && strcmp(d->name, "docker") == 0, "docker found by name");
	ok(s && strcmp(s->name, "swarm") == 0, "swarm found by name");
	ok(backend_find("kubernetes") == NULL, "an unknown name finds none");
	ok(backend_find("Docker") == NULL, "names are exact (case)");
	ok(backend_find("") == NULL && backend_find(NULL) == NULL,
	   "empty and NULL names find none");
	ok(backend_at(0) == d, "docker comes first: the default");
	while (backend_at(n))
		n++;
	is_int(n, 2, "two backends in the registry");
	is_str(backend_names(0, " or ", names, sizeof(names)),
	       "docker or swarm", "every name, joined");
	is_str(backend_names(BACKEND_CAN_REPLICAS, ", ", names, sizeof(names)),
	       "swarm", "the names of those that serve replicas");
	is_str(backend_names(BACKEND_CAN_WARM | BACKEND_CAN_PACKAGES, ", ",
	                     names, sizeof(names)),
	       "docker", "the names of those with both bits");
	is_str(backend_names(BACKEND_CAN_WARM | BACKEND_CAN_REPLICAS, ", ",
	                     names, sizeof(names)),
	       "", "none has both warm and replicas");
	is_str(backend_names(0, " or ", names, 9), "docker o",
	       "a short buffer is cut, never overrun");
}

/* What each backend says it can do; the text results depend on these. */
static void test_capabilities(void)
{
	const struct backend_impl *d = backend_find("docker");
	const struct backend_impl *s = backend_find("swarm");

	if (!d || !s) {
		ok(false, "both backends are registered");
		return;
	}
	ok(backend_impl_has(d, BACKEND_CAN_STDIN) &&
	       backend_impl_has(d, BACKEND_CAN_WARM) &&
	       backend_impl_has(d, BACKEND_CAN_PACKAGES) &&
	       backend_impl_has(d, BACKEND_CAN_NETWORK) &&
	       backend_impl_has(d, BACKEND_CAN_HOST_MOUNTS),
	   "docker: stdin, warm, packages, network, host mounts");
	ok(!backend_impl_has(d, BACKEND_CAN_REPLICAS),
	   "docker: no replicas (its locks are one daemon's)");
	ok(backend_impl_has(s, BACKEND_CAN_REPLICAS),
	   "swarm: replicas (the service name is a lock)");
	ok(!backend_impl_has(s, BACKEND_CAN_STDIN) &&
	       !backend_impl_has(s, BACKEND_CAN_WARM) &&
	       !backend_impl_has(s, BACKEND_CAN_PACKAGES) &&
	       !backend_impl_has(s, BACKEND_CAN_NETWORK) &&
	       !backend_impl_has(s, BACKEND_CAN_HOST_MOUNTS),
	   "swarm: no stdin, warm, packages, network or host mounts");
	ok(!backend_impl_has(d, BACKEND_CAN_WARM | BACKEND_CAN_REPLICAS),
	   "asking two bits needs both");
	is_str(backend_lacks(s, BACKEND_CAN_PACKAGES),
	       "its sandbox nodes have no network",
	       "swarm says why it has no packages (run_code's refusal)");
	is_str(backend_lacks(d, BACKEND_CAN_REPLICAS),
	       "each daemon keeps them apart on its own engine only",
	       "docker says why it serves no replicas");
	is_str(backend_lacks(d, BACKEND_CAN_STDIN), "the backend cannot",
	       "a backend without words for a bit gets the plain phrase");
}

/* The operations every backend has, and those its bits promise. */
static void test_contract(void)
{
	const struct backend_impl *bi;

	for (size_t i = 0; (bi = backend_at(i)); i++) {
		bool warm = backend_impl_has(bi, BACKEND_CAN_WARM);

		ok(bi->create && bi->destroy && bi->images && bi->reap &&
		       bi->sweep_own && bi->health && bi->ping &&
		       bi->box_create && bi->box_attach && bi->box_start &&
		       bi->box_wait && bi->box_inspect && bi->box_signal &&
		       bi->box_release,
		   "%s: every required operation", bi->name);
		ok(!warm || (bi->box_channel && bi->box_hand_over &&
		             bi->handover_prepare),
		   "%s: warm promises a channel and a hand-over", bi->name);
		ok(warm || (!bi->box_channel && !bi->box_hand_over &&
		            !bi->handover_prepare),
		   "%s: no warm operations without the bit", bi->name);
		for (size_t j = 0; j < i; j++)
			ok(strcmp(backend_at(j)->name, bi->name) != 0,
			   "%s: one backend per name", bi->name);
	}
}

static void test_configure_choice(void)
{
	char err[1024];

	is_int(check(err, sizeof(err), NULL), 0, "the default: docker");
	is_int(check(err, sizeof(err), "SANDBOX_BACKEND", "docker", NULL), 0,
	       "SANDBOX_BACKEND=docker");
	is_int(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm", NULL), 0,
	       "SANDBOX_BACKEND=swarm with the default constraint");
	ok(check(err, sizeof(err), "SANDBOX_BACKEND", "k8s", NULL) == -EINVAL &&
	       strstr(err, "SANDBOX_BACKEND='k8s' is not a backend") &&
	       strstr(err, "use docker or swarm") &&
	       strstr(err, "e.g. SANDBOX_BACKEND=docker"),
	   "an unknown name lists the registry's: %s", err);
	ok(check(err, sizeof(err), "SANDBOX_BACKEND", "", NULL) == -EINVAL &&
	       strstr(err, "SANDBOX_BACKEND='' is not a backend"),
	   "an empty name is refused: %s", err);
}

/* What a setting needs from the chosen backend (its capability bits). */
static void test_configure_needs(void)
{
	char err[1024];

	is_int(check(err, sizeof(err), "SANDBOX_ALLOW_NETWORK", "true", NULL),
	       0, "docker gives boxes a network when allowed");
	ok(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm",
	         "SANDBOX_ALLOW_NETWORK", "true", NULL) == -EINVAL &&
	       strcmp(err, "SANDBOX_ALLOW_NETWORK=true cannot be honoured "
	                   "with SANDBOX_BACKEND=swarm: sandbox nodes run "
	                   "their engine with --bridge=none, so tasks have no "
	                   "network; set SANDBOX_ALLOW_NETWORK=false") == 0,
	   "swarm refuses SANDBOX_ALLOW_NETWORK=true: %s", err);
	/* Each replica on its own node's engine: leases keep them apart. */
	is_int(check(err, sizeof(err), "MCP_REPLICA_NAME", "r1", "STORE_URL",
	             "postgresql://mcpsd@db.internal/mcpsd", NULL),
	       0, "a replica on its node's own engine with a shared store");
	is_int(check(err, sizeof(err), "MCP_REPLICA_NAME", "r1",
	             "SANDBOX_BACKEND", "swarm", "STORE_URL",
	             "postgresql://mcpsd@db.internal/mcpsd", NULL),
	       0, "a replica on a Swarm with a shared store");
}

/* The Swarm backend's own rules (its configure hook). */
static void test_configure_swarm(void)
{
	static const char *const bad[] = {"", "  ", " ; ;", NULL};
	char longc[SWARM_CONSTRAINT_MAX + 16], err[1024];

	for (size_t i = 0; bad[i]; i++)
		ok(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm",
		         "SWARM_CONSTRAINTS", bad[i], NULL) == -EINVAL &&
		       strstr(err, "at least one placement constraint") &&
		       strstr(err, "e.g. SWARM_CONSTRAINTS="),
		   "SWARM_CONSTRAINTS='%s' refused: %s", bad[i], err);
	memset(longc, 'a', sizeof(longc) - 1);
	longc[sizeof(longc) - 1] = '\0';
	memcpy(longc, "node.labels.", 12);
	ok(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm",
	         "SWARM_CONSTRAINTS", longc, NULL) == -EINVAL &&
	       strstr(err, "under 256"),
	   "a constraint of %zu characters is refused: %s", strlen(longc), err);
	is_int(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm",
	             "SWARM_CONSTRAINTS",
	             " node.role==worker ; node.labels.sandbox==true ;", NULL),
	       0, "two constraints, spaces and a trailing ';' accepted");
	ok(check(err, sizeof(err), "SANDBOX_BACKEND", "swarm",
	         "SANDBOX_RUNTIME", "runsc", NULL) == -EINVAL &&
	       strstr(err, "SANDBOX_RUNTIME cannot be chosen per service"),
	   "swarm refuses SANDBOX_RUNTIME: %s", err);
	is_int(check(err, sizeof(err), "SANDBOX_RUNTIME", "runsc", NULL), 0,
	       "docker takes SANDBOX_RUNTIME");
	is_int(check(err, sizeof(err), "SWARM_CONSTRAINTS", " ; ", NULL), 0,
	       "docker: no constraint needed when swarm is not chosen");
	ok(check(err, sizeof(err), "SWARM_CONSTRAINTS", "node.id==$(id)",
	         NULL) == -EINVAL &&
	       strstr(err, "SWARM_CONSTRAINTS='node.id==$(id)' must be"),
	   "the form of SWARM_CONSTRAINTS is checked whatever the choice: %s",
	   err);
}

static void test_constraint_next(void)
{
	const char *s = " a==b ;; c!=d;", *c;
	size_t n;
	char got[4][16];
	size_t k = 0;

	while (k < 4 && swarm_constraint_next(&s, &c, &n)) {
		snprintf(got[k], sizeof(got[k]), "%.*s", (int)n, c);
		k++;
	}
	ok(k == 3 && strcmp(got[0], "a==b") == 0 && got[1][0] == '\0' &&
	       strcmp(got[2], "c!=d") == 0,
	   "constraints: split at ';', trimmed, an empty part told (%zu)", k);
	s = "";
	ok(!swarm_constraint_next(&s, &c, &n), "constraints: none in ''");
}

/* Whether path is in /proc/self/mountinfo as a mount point. */
static bool mounted_at(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], mp[4096];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 &&
		        strcmp(mp, path) == 0;
	if (f)
		fclose(f);
	return found;
}

/* The Docker backend's hand-over, with real mounts in a scratch root. */
static void test_handover(void)
{
	char tmpl[] = "/tmp/mcpsd-test-handover-XXXXXX", root[64];
	char host_root[] = "/host/root";
	char ws[128], file[160], host[4096], err[512], detail[4200];
	struct config cfg;
	struct docker_handover h;
	struct docker_handover_slot slot, other;
	int fd;

	memset(&cfg, 0, sizeof(cfg));
	memset(&h, 0, sizeof(h));
	if (!mkdtemp(tmpl)) {
		ok(false, "a scratch directory: %s", strerror(errno));
		return;
	}
	snprintf(root, sizeof(root), "%s", tmpl);
	cfg.sandbox_root = root;
	cfg.sandbox_host_path = host_root;
	ok(docker_handover_slot(&h, "mcpsd-w-1", &slot, host, sizeof(host), err,
	                        sizeof(err)) == -EINVAL &&
	       slot.dir[0] == '\0',
	   "no slot before the pool is prepared: %s", err);
	if (docker_handover_prepare(&h, &cfg, err, sizeof(err)) < 0) {
		/* Not root, or no CAP_SYS_ADMIN: the daemon says the same. */
		printf("# hand-over not tested, mounts are not allowed here: "
		       "%s\n",
		       err);
		docker_handover_finish(&h);
		rmdir(h.dir);
		rmdir(root);
		return;
	}
	ok(mounted_at(h.dir), "the pool is a mount of its own: %s", h.dir);
	ok(docker_handover_slot(&h, "../x", &slot, host, sizeof(host), err,
	                        sizeof(err)) == -EINVAL,
	   "a name with a '/' is refused: %s", err);
	is_int(docker_handover_slot(&h, "mcpsd-w-1", &slot, host, sizeof(host),
	                            err, sizeof(err)),
	       0, "a slot for box mcpsd-w-1");
	is_str(host, "/host/root/pool/mcpsd-w-1",
	       "the engine mounts the slot as its host sees it");
	ok(docker_handover_intact(&slot, detail, sizeof(detail)),
	   "an unused slot is intact");

	snprintf(ws, sizeof(ws), "%s/ws", root);
	snprintf(file, sizeof(file), "%s/hello", ws);
	tap_mkdir(root, "ws");
	tap_put(root, "ws/hello", "hi");
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ok(docker_handover_give(&slot, fd, err, sizeof(err)) < 0 &&
	       !slot.given && strstr(err, "cannot mount the workspace"),
	   "giving what is not a directory fails: %s", err);
	if (fd >= 0)
		close(fd);
	fd = open(ws, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	is_int(docker_handover_give(&slot, fd, err, sizeof(err)), 0,
	       "the workspace is handed over");
	close(fd);
	{
		char seen[4200];

		snprintf(seen, sizeof(seen), "%s/hello", slot.dir);
		ok(access(seen, R_OK) == 0,
		   "its files appear where the box has the slot");
	}
	ok(docker_handover_give(&slot, -1, err, sizeof(err)) == -EALREADY,
	   "once per box: %s", err);
	ok(docker_handover_intact(&slot, detail, sizeof(detail)),
	   "a used slot is intact");
	docker_handover_release(&slot);
	ok(access(file, R_OK) == 0,
	   "releasing leaves the workspace itself alone");
	{
		struct stat sb;
		char was[4200];

		snprintf(was, sizeof(was), "%s/pool/mcpsd-w-1", root);
		ok(lstat(was, &sb) < 0 && errno == ENOENT,
		   "released: the slot's directory is gone");
	}

	is_int(docker_handover_slot(&h, "mcpsd-w-2", &other, host, sizeof(host),
	                            err, sizeof(err)),
	       0, "a second slot");
	rmdir(other.dir);
	ok(!docker_handover_intact(&other, detail, sizeof(detail)) &&
	       strstr(detail, "its mount point") &&
	       strstr(detail, "was removed"),
	   "a removed mount point is damage: %s", detail);
	docker_handover_release(&other);

	docker_handover_finish(&h);
	ok(!mounted_at(h.dir), "the pool's mount is undone at the end");
	rmdir(h.dir);
	unlink(file);
	rmdir(ws);
	rmdir(root);
}

/* SANDBOX_WARM_CHANNEL, and whose process may take a box's channel. */
static void test_channel(void)
{
	static const char cid[] = "0123456789abcdef0123456789abcdef"
	                          "0123456789abcdef0123456789abcdef";
	char err[1024], text[512];

	is_int(check(err, sizeof(err), "SANDBOX_WARM_CHANNEL", "socket", NULL),
	       0, "SANDBOX_WARM_CHANNEL=socket");
	ok(check(err, sizeof(err), "SANDBOX_WARM_CHANNEL", "tcp", NULL) ==
	           -EINVAL &&
	       strstr(err, "SANDBOX_WARM_CHANNEL must be 'auto' (the "
	                   "default), 'socket' or 'attach', not 'tcp'"),
	   "another channel is refused: %s", err);
	snprintf(text, sizeof(text), "12:memory:/docker/%s\n1:cpu:/docker/%s\n",
	         cid, cid);
	ok(docker_channel_cgroup_names(text, strlen(text), cid),
	   "cgroupfs: /docker/<id>");
	snprintf(text, sizeof(text), "0::/system.slice/docker-%s.scope\n", cid);
	ok(docker_channel_cgroup_names(text, strlen(text), cid),
	   "systemd: docker-<id>.scope");
	snprintf(text, sizeof(text), "4:memory:/mcpsd-runs/mcpsd-w-ab/%s", cid);
	ok(docker_channel_cgroup_names(text, strlen(text), cid),
	   "a measured box's parent, at the end of the file");
	snprintf(text, sizeof(text), "12:memory:/docker/%sff\n", cid);
	ok(!docker_channel_cgroup_names(text, strlen(text), cid),
	   "a longer id is another container");
	snprintf(text, sizeof(text), "12:memory:/docker/x%s\n", cid);
	ok(!docker_channel_cgroup_names(text, strlen(text), cid),
	   "the id must be a whole component");
	ok(!docker_channel_cgroup_names("12:memory:/\n", 12, cid),
	   "a host process is not in the box");
	ok(!docker_channel_cgroup_names(text, strlen(text), "abc"),
	   "a short id matches nothing");
}

/* SANDBOX_WARM_CHANNEL=auto by the engine's /info, and the setting. */
static void test_channel_auto(void)
{
	static const struct {
		const char *info;
		bool socket;
		const char *why;
	} cases[] = {
	    {"{\"SecurityOptions\":[\"name=apparmor\",\"name=seccomp,profile="
	     "default\",\"name=cgroupns\"],\"OperatingSystem\":\"Debian "
	     "GNU/Linux 13 (trixie)\"}",
	     true, "a local engine"},
	    {"{\"SecurityOptions\":[\"name=seccomp,profile=default\",\"name="
	     "userns\"]}",
	     false, "remaps user ids"},
	    {"{\"SecurityOptions\":[\"name=rootless\"]}", false, "rootless"},
	    {"{\"SecurityOptions\":[\"name=usernsx\"],\"OperatingSystem\":"
	     "\"Docker Desktop\"}",
	     false, "Docker Desktop"},
	    {"{\"SecurityOptions\":\"name=userns\"}", true, "a local engine"},
	    {"{}", true, "a local engine"},
	};
	char err[1024], why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		cJSON *info = cJSON_Parse(cases[i].info);

		ok(info &&
		       docker_channel_auto(info, why, sizeof(why)) ==
		           cases[i].socket &&
		       strstr(why, cases[i].why),
		   "auto: %s -> %s (%s)", cases[i].info,
		   cases[i].socket ? "socket" : "attach", why);
		cJSON_Delete(info);
	}
	is_int(check(err, sizeof(err), "SANDBOX_WARM_CHANNEL", "auto", NULL), 0,
	       "SANDBOX_WARM_CHANNEL=auto");
}

int main(void)
{
	setenv("MCP_AUTH", "none", 1);
	setenv("MCP_HTTP_ADDR", "127.0.0.1:8080", 1);
	setenv("SANDBOX_ROOT", "/nonexistent/mcpsd-test-backend", 1);
	setenv("MCP_LOG_LEVEL", "warn", 1);
	test_registry();
	test_capabilities();
	test_contract();
	test_configure_choice();
	test_configure_needs();
	test_configure_swarm();
	test_constraint_next();
	test_handover();
	test_channel();
	test_channel_auto();
	return tap_done();
}
