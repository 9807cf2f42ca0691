/* SPDX-License-Identifier: MIT */
/*
 * oauth_page: the HTML a person sees during an OAuth authorization, rendered
 * on the server with no script: the consent page (who asks, where the
 * browser goes afterwards, a field for the tenant's API token, Approve and
 * Deny) and the error page shown when a request cannot safely be sent back
 * to its client. Every value from outside is HTML-escaped. Pages go out
 * with the Content-Security-Policy from oauth_page_csp(), which allows the
 * page's own style and nothing else, refuses framing, and on purpose sets no
 * form-action: Chrome applies form-action to the redirect that follows the
 * form, and would block the way back to the client. Thread-safe.
 */
#ifndef MCPSD_OAUTH_PAGE_H
#define MCPSD_OAUTH_PAGE_H

#include <stdbool.h>

struct oauth_page_consent {
	const char *server;      /* this server's origin */
	const char *client_name; /* may be NULL */
	const char *client_id;
	bool client_is_document;   /* the client id is a metadata URL */
	const char *redirect_uri;  /* the full URI the browser goes to */
	const char *redirect_host; /* its host, shown large */
	bool redirect_loopback;    /* a program on the user's computer */
	const char *action;        /* the form's target path */
	const char *request_id;    /* hidden fields */
	const char *csrf;
	const char *error; /* NULL, or why the last attempt failed */
	unsigned access_ttl_s;
	unsigned refresh_ttl_days;
};

/* The consent page; caller frees. NULL when out of memory. */
char *oauth_page_consent(const struct oauth_page_consent *p);

/*
 * An error page: a title, what happened, and what to do next (NULL for
 * none). Caller frees; NULL when out of memory.
 */
char *oauth_page_error(const char *title, const char *what, const char *next);

/* The Content-Security-Policy header value for these pages (static). */
const char *oauth_page_csp(void);

#endif
