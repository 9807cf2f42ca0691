/* SPDX-License-Identifier: MIT */
/*
 * test_run_arguments: run_code's arguments as run_arguments parses and checks
 * them: memory_mb and cpus within the operator's maxima, the inputs object and
 * its size, the messages that name the allowed range, and run_arguments_check
 * catching a request built without run_arguments_parse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "config/config.h"
#include "run/run_arguments.h"
#include "runner.h"
#include "tap.h"

static void fill_config(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->memory_mb = 256;
	cfg->memory_max_mb = 1024;
	cfg->cpus = 0.5;
	cfg->cpus_max = 2;
	cfg->timeout_s = 30;
	cfg->max_timeout_s = 300;
	cfg->code_max_bytes = 1024;
	cfg->stdin_max_bytes = 1024;
	cfg->env_max_bytes = 1024;
	cfg->inputs_max_bytes = 64;
}

/*
 * Parses the JSON arguments json into req; returns run_arguments_parse's code,
 * the message in err. st is finished by the caller.
 */
static int parse(const char *json, const struct config *cfg,
                 struct runner_request *req, struct run_arguments_store *st,
                 char *err, size_t errlen, cJSON **args)
{
	memset(req, 0, sizeof(*req));
	err[0] = '\0';
	*args = cJSON_Parse(json);
	if (!*args) {
		snprintf(err, errlen, "bad test JSON");
		return -999;
	}
	return run_arguments_parse(*args, cfg, req, st, err, errlen);
}

/* One call: the code and whether err contains want (when not NULL). */
static int one(const char *json, const struct config *cfg, const char *want,
               struct runner_request *out)
{
	struct runner_request req;
	struct run_arguments_store st;
	char err[512];
	cJSON *args = NULL;
	int rc = parse(json, cfg, &req, &st, err, sizeof(err), &args);

	if (want && !strstr(err, want)) {
		ok(false, "message '%s' contains '%s'", err, want);
		rc = -1000;
	}
	if (out) {
		*out = req;
		out->inputs_json = NULL; /* freed below */
		out->env = NULL;
	}
	run_arguments_store_finish(&st);
	cJSON_Delete(args);
	return rc;
}

static void test_limits(void)
{
	struct config cfg;
	struct runner_request req;

	fill_config(&cfg);
	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\"}", &cfg, NULL, &req),
	    0, "no limits given");
	is_int(req.memory_mb, 0, "memory_mb 0: the default applies");
	ok(req.cpus == 0, "cpus 0: the default applies");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":512,"
	           "\"cpus\":1.5}",
	           &cfg, NULL, &req),
	       0, "limits within the maxima");
	is_int(req.memory_mb, 512, "memory_mb taken");
	ok(req.cpus == 1.5, "cpus taken");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":16,"
	           "\"cpus\":0.01}",
	           &cfg, NULL, &req),
	       0, "the smallest limits");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":1024,"
	           "\"cpus\":2}",
	           &cfg, NULL, &req),
	       0, "the maxima themselves");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":null,"
	           "\"cpus\":null}",
	           &cfg, NULL, &req),
	       0, "null is absent");

	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":1025}",
	        &cfg, "memory_mb must be a whole number from 16 to 1024", NULL),
	    -EINVAL, "memory_mb above the maximum");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":15}",
	           &cfg, "from 16 to 1024 (the default is 256)", NULL),
	       -EINVAL, "memory_mb below the minimum");
	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":100.5}",
	        &cfg, "whole number", NULL),
	    -EINVAL, "memory_mb not whole");
	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":\"64\"}",
	        &cfg, "memory_mb must be", NULL),
	    -EINVAL, "memory_mb a string");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":-1}",
	           &cfg, "memory_mb must be", NULL),
	       -EINVAL, "memory_mb negative");
	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":1e300}",
	        &cfg, "memory_mb must be", NULL),
	    -EINVAL, "memory_mb huge");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"cpus\":2.01}",
	           &cfg,
	           "cpus must be a number from 0.01 to 2 (the default "
	           "is 0.5)",
	           NULL),
	       -EINVAL, "cpus above the maximum");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"cpus\":0}", &cfg,
	           "from 0.01 to 2", NULL),
	       -EINVAL, "cpus zero");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"cpus\":true}",
	           &cfg, "cpus must be", NULL),
	       -EINVAL, "cpus a boolean");

	cfg.memory_max_mb = 256;
	cfg.cpus_max = 0.5;
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"memory_mb\":257}",
	           &cfg, "from 16 to 256", NULL),
	       -EINVAL, "the operator's maximum is the range's end");
}

static void test_inputs(void)
{
	struct config cfg;
	struct runner_request req;
	struct run_arguments_store st;
	char err[512];
	cJSON *args = NULL;

	fill_config(&cfg);
	is_int(parse("{\"language\":\"python\",\"code\":\"1\",\"inputs\":"
	             "{\"n\": 3, \"names\": [\"a\", \"b\"]}}",
	             &cfg, &req, &st, err, sizeof(err), &args),
	       0, "an inputs object");
	is_str(req.inputs_json, "{\"n\":3,\"names\":[\"a\",\"b\"]}",
	       "kept as compact JSON");
	is_int(req.inputs_len, strlen("{\"n\":3,\"names\":[\"a\",\"b\"]}"),
	       "its length");
	ok(st.inputs == req.inputs_json, "owned by the store");
	run_arguments_store_finish(&st);
	ok(st.inputs == NULL && st.env == NULL, "the store is emptied");
	run_arguments_store_finish(&st);
	cJSON_Delete(args);

	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":{}}",
	           &cfg, NULL, &req),
	       0, "an empty object");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":null}",
	           &cfg, NULL, &req),
	       0, "null is absent");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":[1]}",
	           &cfg, "inputs must be a JSON object", NULL),
	       -EINVAL, "an array is refused");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":\"x\"}",
	           &cfg, "/sandbox/inputs.json", NULL),
	       -EINVAL, "a string is refused, the message says where it goes");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":"
	           "{\"k\":"
	           "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	           "\"}}",
	           &cfg, "inputs is 65 bytes as JSON, more than the 64 allowed",
	           NULL),
	       -EINVAL, "inputs over SANDBOX_MAX_INPUTS_BYTES");
	is_int(one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":"
	           "{\"k\":"
	           "\"yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"
	           "\"}}",
	           &cfg, NULL, &req),
	       0, "inputs of exactly the limit");
	/* A later bad argument still frees what was allocated (ASan). */
	is_int(
	    one("{\"language\":\"python\",\"code\":\"1\",\"inputs\":{\"a\":1},"
	        "\"environment\":{\"A\":\"1\"},\"timeout_seconds\":0}",
	        &cfg, "timeout_seconds", NULL),
	    -EINVAL, "refused with other arguments parsed");
}

static void test_check(void)
{
	struct config cfg;
	struct runner_request req;
	char err[256];

	fill_config(&cfg);
	memset(&req, 0, sizeof(req));
	req.language = "python";
	req.code = "1";
	req.code_len = 1;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), 0,
	       "a plain run");
	req.memory_mb = 2048;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "memory_mb over the maximum is caught by the runner too");
	ok(strstr(err, "16 to 1024") != NULL, "range named: %s", err);
	req.memory_mb = 0;
	req.cpus = 3;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "cpus over the maximum");
	ok(strstr(err, "0.01 to 2") != NULL, "range named: %s", err);
	req.cpus = 0;
	req.inputs_json = "{\"a\":\"01234567890123456789012345678901234567890"
	                  "1234567890123456789\"}";
	req.inputs_len = strlen(req.inputs_json);
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "inputs over the limit");
}

/* check_code's arguments: a check, one-off, short, nothing but code. */
static void test_syntax_check(void)
{
	struct config cfg;
	struct runner_request req;
	char err[256];
	cJSON *a;

	fill_config(&cfg);
	memset(&req, 0, sizeof(req));
	a = cJSON_Parse("{\"conversationId\":\"c\",\"language\":\"go\","
	                "\"code\":\"package main\"}");
	is_int(run_arguments_check_parse(a, &cfg, &req, err, sizeof(err)), 0,
	       "check arguments parse");
	ok(req.check && req.one_off, "a one-off check");
	is_int(req.timeout_s, RUN_ARGUMENTS_CHECK_TIMEOUT_S,
	       "the check's limit");
	is_str(req.language, "go", "language");
	cJSON_Delete(a);

	cfg.max_timeout_s = 10;
	memset(&req, 0, sizeof(req));
	a = cJSON_Parse("{\"language\":\"go\",\"code\":\"x\"}");
	is_int(run_arguments_check_parse(a, &cfg, &req, err, sizeof(err)), 0,
	       "conversationId is optional");
	is_int(req.timeout_s, 10, "never above the operator's maximum");
	cJSON_Delete(a);

	memset(&req, 0, sizeof(req));
	a = cJSON_Parse("{\"language\":\"go\"}");
	is_int(run_arguments_check_parse(a, &cfg, &req, err, sizeof(err)),
	       -EINVAL, "code is required");
	ok(strstr(err, "code is required") != NULL, "says so: %s", err);
	cJSON_Delete(a);
	memset(&req, 0, sizeof(req));
	a = cJSON_Parse("{\"language\":\"go\",\"code\":\"x\","
	                "\"conversationId\":5}");
	is_int(run_arguments_check_parse(a, &cfg, &req, err, sizeof(err)),
	       -EINVAL, "a conversationId that is not a string");
	cJSON_Delete(a);

	memset(&req, 0, sizeof(req));
	req.language = "go";
	req.code = "x";
	req.code_len = 1;
	req.check = true;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), 0,
	       "a bare check");
	req.workspace_host_path = "/srv/ws/abc";
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "a check never gets /data");
	req.workspace_host_path = NULL;
	req.network = true;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "a check never gets network");
	req.network = false;
	req.stdin_data = "";
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "a check takes no stdin");
}

/* packages: a list of distinct strings; their form is the runner's. */
static void test_packages(void)
{
	struct config cfg;
	struct runner_request req;
	struct run_arguments_store st;
	char err[512];
	cJSON *args = NULL;
	int rc;

	fill_config(&cfg);
	rc = parse("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[\"pandas\",\"tabulate==0.9.0\"]}",
	           &cfg, &req, &st, err, sizeof(err), &args);
	ok(rc == 0 && req.n_packages == 2 &&
	       strcmp(req.packages[0], "pandas") == 0 &&
	       strcmp(req.packages[1], "tabulate==0.9.0") == 0,
	   "packages parsed in order (%s)", err);
	run_arguments_store_finish(&st);
	cJSON_Delete(args);
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[]}",
	           &cfg, NULL, &req),
	       0, "an empty list is no packages");
	is_int((int)req.n_packages, 0, "none");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":null}",
	           &cfg, NULL, NULL),
	       0, "null is no packages");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":\"pandas\"}",
	           &cfg, "packages must be a list", NULL),
	       -EINVAL, "a string is not a list");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[\"pandas\",3]}",
	           &cfg, "non-empty strings", NULL),
	       -EINVAL, "a number in the list");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[\"\"]}",
	           &cfg, "non-empty strings", NULL),
	       -EINVAL, "an empty name");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[\"a\",\"b\",\"a\"]}",
	           &cfg, "listed twice", NULL),
	       -EINVAL, "a name twice");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"packages\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\","
	           "\"g\",\"h\",\"i\",\"j\",\"k\",\"l\",\"m\",\"n\",\"o\","
	           "\"p\",\"q\",\"r\",\"s\",\"t\",\"u\",\"v\",\"w\",\"x\","
	           "\"y\",\"z\",\"aa\",\"ab\",\"ac\",\"ad\",\"ae\",\"af\","
	           "\"ag\"]}",
	           &cfg, "at most 32", NULL),
	       -EINVAL, "more than PACKAGES_MAX");
	memset(&req, 0, sizeof(req));
	req.language = "python";
	req.code = "1";
	req.code_len = 1;
	req.check = true;
	req.n_packages = 1;
	is_int(run_arguments_check(&req, &cfg, err, sizeof(err)), -EINVAL,
	       "a syntax check takes no packages");
	ok(strstr(err, "packages") != NULL, "and says so: %s", err);
}

/* conversationId: given (borrowed), or minted when absent. */
static void test_conversation_id(void)
{
	char minted[RUN_ARGUMENTS_CONV_MINT_LEN + 1],
	    first[RUN_ARGUMENTS_CONV_MINT_LEN + 1];
	const char *id;
	char err[256];
	cJSON *a = cJSON_Parse("{\"conversationId\":\"chat-42\"}");

	is_int(run_arguments_conversation_id(a, minted, &id, err, sizeof(err)),
	       0, "a given id");
	is_str(id, "chat-42", "is used as given");
	is_str(minted, "", "nothing minted");
	cJSON_Delete(a);

	a = cJSON_Parse("{\"language\":\"python\"}");
	is_int(run_arguments_conversation_id(a, minted, &id, err, sizeof(err)),
	       0, "no id");
	ok(id == minted && strlen(id) == 34 && strncmp(id, "c-", 2) == 0 &&
	       strspn(id + 2, "0123456789abcdef") == 32,
	   "one is minted: c- and 128 random bits in hex: %s", id);
	memcpy(first, minted, sizeof(first));
	is_int(run_arguments_conversation_id(a, minted, &id, err, sizeof(err)),
	       0, "no id again");
	ok(strcmp(first, minted) != 0, "another id each time (%s, %s)", first,
	   minted);
	cJSON_Delete(a);

	a = cJSON_Parse("{\"conversationId\":null}");
	is_int(run_arguments_conversation_id(a, minted, &id, err, sizeof(err)),
	       0, "null is absent");
	ok(id == minted && minted[0] == 'c', "and minted");
	cJSON_Delete(a);

	a = cJSON_Parse("{\"conversationId\":42}");
	is_int(run_arguments_conversation_id(a, minted, &id, err, sizeof(err)),
	       -EINVAL, "a number refused");
	ok(strstr(err, "must be a string") && strstr(err, "leave it out"),
	   "says what to pass: %s", err);
	ok(!id && minted[0] == '\0', "nothing minted for a bad id");
	cJSON_Delete(a);
}

static void test_network(void)
{
	struct config cfg;
	struct runner_request req;
	struct run_arguments_store st;
	char err[512];
	cJSON *args = NULL;
	int rc;

	fill_config(&cfg);
	cfg.allow_network = true;
	rc = parse("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":[\"API.example.com\",\"*.github.com:8443\","
	           "\"api.example.com\"]}",
	           &cfg, &req, &st, err, sizeof(err), &args);
	ok(rc == 0 && req.network && req.network_asked &&
	       req.network_asked->n == 2 &&
	       strcmp(req.network_asked->rules[0].name, "api.example.com") ==
	           0 &&
	       req.network_asked->rules[1].wildcard &&
	       req.network_asked->rules[1].port == 8443,
	   "a list of names: network on, the names folded, once each (%s)",
	   err);
	run_arguments_store_finish(&st);
	cJSON_Delete(args);
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":true}",
	           &cfg, NULL, &req),
	       0, "true");
	ok(req.network && !req.network_asked, "true: the tenant's whole list");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":[]}",
	           &cfg, "network: [] allows nothing", NULL),
	       -EINVAL, "an empty list is refused");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":[\"https://x.com/\"]}",
	           &cfg, "network: ", NULL),
	       -EINVAL, "a URL is not a name");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":[1]}",
	           &cfg, "domain names as strings", NULL),
	       -EINVAL, "a number is not a name");
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":\"x.com\"}",
	           &cfg, "true, false or a list of domain names", NULL),
	       -EINVAL, "a string is not a list");
	cfg.allow_network = false;
	is_int(one("{\"language\":\"python\",\"code\":\"1\","
	           "\"network\":[\"x.com\"]}",
	           &cfg, "network access is disabled by the operator", NULL),
	       -EPERM, "a list when the operator allows no network");
}

int main(void)
{
	test_network();
	test_conversation_id();
	test_packages();
	test_limits();
	test_inputs();
	test_check();
	test_syntax_check();
	return tap_done();
}
