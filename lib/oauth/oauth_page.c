/* SPDX-License-Identifier: MIT */
/*
 * oauth_page: pages are assembled into a bounded buffer; the only markup
 * is the constant text below, and every variable goes through html(). The
 * style sheet is a constant too, so the policy can allow exactly it by its
 * hash instead of allowing inline style in general.
 */
#include "oauth/oauth_page.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/buf.h"

#define PAGE_MAX (64 * 1024)

static const char style[] =
    "body{margin:0;background:#f4f5f7;color:#1d2330;"
    "font:16px/1.5 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif}"
    "main{max-width:34rem;margin:3rem auto;padding:2rem 2.25rem;"
    "background:#fff;border:1px solid #dde1e8;border-radius:12px}"
    ".server{margin:0 0 1rem;color:#5a6475;font-size:.9rem}"
    "h1{font-size:1.45rem;line-height:1.3;margin:0 0 .75rem}"
    "q{font-weight:700}"
    ".who{color:#5a6475;font-size:.9rem;margin:-.25rem 0 1rem;"
    "word-break:break-all}"
    ".dest{margin:1.25rem 0;padding:1rem 1.1rem;background:#fff8e6;"
    "border:1px solid #f0d48a;border-radius:10px}"
    ".dest span{display:block;font-size:.9rem;color:#6b5a22}"
    ".dest strong{display:block;font-size:1.6rem;line-height:1.25;"
    "margin:.2rem 0;word-break:break-all}"
    ".dest code{display:block;font-size:.8rem;color:#5a6475;"
    "word-break:break-all}"
    ".error{margin:1rem 0;padding:.75rem 1rem;background:#fdecec;"
    "border:1px solid #f1a9a9;border-radius:8px;color:#8a1c1c}"
    "label{display:block;font-weight:600;margin:1.25rem 0 .35rem}"
    "input[type=password]{box-sizing:border-box;width:100%;padding:.6rem "
    ".7rem;font:inherit;border:1px solid #b8c0cc;border-radius:8px}"
    ".hint,.fine{font-size:.85rem;color:#5a6475}"
    ".buttons{display:flex;gap:.75rem;margin-top:1.25rem}"
    "button{font:inherit;font-weight:600;padding:.6rem 1.4rem;"
    "border-radius:8px;border:1px solid #1f5fd1;background:#1f5fd1;"
    "color:#fff;cursor:pointer}"
    "button.secondary{background:#fff;color:#1d2330;border-color:#b8c0cc}"
    ".fine{margin-top:1.75rem;border-top:1px solid #eceff3;"
    "padding-top:1rem}";

static pthread_once_t csp_once = PTHREAD_ONCE_INIT;
static char csp[256];

static void csp_init(void)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
	unsigned int mdlen = 0;

	if (!EVP_Digest(style, sizeof(style) - 1, md, &mdlen, EVP_sha256(),
	                NULL)) {
		/* No hash: no style at all rather than any style. */
		snprintf(csp, sizeof(csp),
		         "default-src 'none'; frame-ancestors 'none'; "
		         "base-uri 'none'");
		return;
	}
	EVP_EncodeBlock(b64, md, (int)mdlen);
	snprintf(csp, sizeof(csp),
	         "default-src 'none'; style-src 'sha256-%s'; "
	         "frame-ancestors 'none'; base-uri 'none'",
	         (const char *)b64);
}

const char *oauth_page_csp(void)
{
	pthread_once(&csp_once, csp_init);
	return csp;
}

/* Appends s HTML-escaped (text and attribute values alike). */
static int html(struct buf *b, const char *s)
{
	int r = 0;

	for (; s && *s && r == 0; s++) {
		switch (*s) {
		case '&':
			r = buf_puts(b, "&amp;");
			break;
		case '<':
			r = buf_puts(b, "&lt;");
			break;
		case '>':
			r = buf_puts(b, "&gt;");
			break;
		case '"':
			r = buf_puts(b, "&quot;");
			break;
		case '\'':
			r = buf_puts(b, "&#39;");
			break;
		default:
			r = buf_putc(b, *s);
		}
	}
	return r;
}

static int head(struct buf *b, const char *title)
{
	int r = buf_puts(b, "<!doctype html>\n<html lang=\"en\"><head>"
	                    "<meta charset=\"utf-8\">"
	                    "<meta name=\"viewport\" content=\"width=device-"
	                    "width, initial-scale=1\">"
	                    "<meta name=\"referrer\" content=\"same-origin\">"
	                    "<title>");

	if (r == 0)
		r = html(b, title);
	if (r == 0)
		r = buf_printf(b,
		               " · mcp-sandboxd</title><style>%s</style>"
		               "</head><body><main>\n",
		               style);
	return r;
}

/* After "every": "hour", "2 hours", "90 minutes". */
static void duration(unsigned s, char *out, size_t n)
{
	if (s == 3600)
		snprintf(out, n, "hour");
	else if (s % 3600 == 0)
		snprintf(out, n, "%u hours", s / 3600);
	else
		snprintf(out, n, "%u minutes", s / 60);
}

char *oauth_page_consent(const struct oauth_page_consent *p)
{
	struct buf b;
	char ttl[32];
	const char *name = p->client_name && *p->client_name
	                       ? p->client_name
	                       : "An unnamed application";
	int r;

	buf_init(&b, PAGE_MAX);
	duration(p->access_ttl_s, ttl, sizeof(ttl));
	r = head(&b, "Allow access?");
	if (r == 0)
		r = buf_puts(&b, "<p class=\"server\">mcp-sandboxd at <b>");
	if (r == 0)
		r = html(&b, p->server);
	if (r == 0)
		r = buf_puts(&b, "</b></p>\n<h1>Allow <q>");
	if (r == 0)
		r = html(&b, name);
	if (r == 0)
		r = buf_puts(&b, "</q> to use this sandbox server?</h1>\n"
		                 "<p class=\"who\">");
	if (r == 0)
		r = buf_puts(&b,
		             p->client_is_document
		                 ? "Named by the metadata document at "
		                 : "The application chose this name itself. "
		                   "Client ID ");
	if (r == 0)
		r = html(&b, p->client_id);
	if (r == 0)
		r = buf_puts(
		    &b, "</p>\n<p>It will run code and read, write and delete "
		        "files in this server's sandboxes with the same access "
		        "as the API token you enter below: the same "
		        "conversations and the same files.</p>\n"
		        "<div class=\"dest\"><span>After you decide, your "
		        "browser goes to</span><strong>");
	if (r == 0)
		r = html(&b, p->redirect_host);
	if (r == 0 && p->redirect_loopback)
		r = buf_puts(&b, "</strong><span>a program on your own "
		                 "computer</span><code>");
	else if (r == 0)
		r = buf_puts(&b, "</strong><code>");
	if (r == 0)
		r = html(&b, p->redirect_uri);
	if (r == 0)
		r = buf_puts(&b, "</code></div>\n");
	if (r == 0 && p->error) {
		r = buf_puts(&b, "<p class=\"error\" role=\"alert\">");
		if (r == 0)
			r = html(&b, p->error);
		if (r == 0)
			r = buf_puts(&b, "</p>\n");
	}
	if (r == 0)
		r = buf_puts(&b, "<form method=\"post\" action=\"");
	if (r == 0)
		r = html(&b, p->action);
	if (r == 0)
		r = buf_puts(&b, "\"><input type=\"hidden\" name=\"request\" "
		                 "value=\"");
	if (r == 0)
		r = html(&b, p->request_id);
	if (r == 0)
		r = buf_puts(&b, "\"><input type=\"hidden\" name=\"csrf\" "
		                 "value=\"");
	if (r == 0)
		r = html(&b, p->csrf);
	if (r == 0)
		r = buf_printf(
		    &b,
		    "\">\n<label for=\"token\">API token of the tenant that "
		    "approves</label>"
		    "<input id=\"token\" name=\"token\" type=\"password\" "
		    "autocomplete=\"current-password\" autofocus>\n"
		    "<p class=\"hint\">The token this server's operator gave "
		    "you (MCP_API_TOKEN, or yours in MCP_API_TOKENS). It is "
		    "checked here and never sent to the application.</p>\n"
		    "<div class=\"buttons\"><button type=\"submit\" "
		    "name=\"action\" value=\"approve\">Approve</button>"
		    "<button type=\"submit\" name=\"action\" value=\"deny\" "
		    "class=\"secondary\">Deny</button></div>\n</form>\n"
		    "<p class=\"fine\">The application's access is renewed "
		    "every %s while it uses it, and ends after %u days "
		    "without use, when it is disconnected, or when the "
		    "tenant's API token changes.</p>\n"
		    "</main></body></html>\n",
		    ttl, p->refresh_ttl_days);
	if (r < 0) {
		buf_finish(&b);
		return NULL;
	}
	return buf_take(&b, NULL);
}

char *oauth_page_error(const char *title, const char *what, const char *next)
{
	struct buf b;
	int r;

	buf_init(&b, PAGE_MAX);
	r = head(&b, title);
	if (r == 0)
		r = buf_puts(&b, "<p class=\"server\">mcp-sandboxd</p>\n<h1>");
	if (r == 0)
		r = html(&b, title);
	if (r == 0)
		r = buf_puts(&b, "</h1>\n<p class=\"error\" role=\"alert\">");
	if (r == 0)
		r = html(&b, what);
	if (r == 0)
		r = buf_puts(&b, "</p>\n");
	if (r == 0 && next) {
		r = buf_puts(&b, "<p>");
		if (r == 0)
			r = html(&b, next);
		if (r == 0)
			r = buf_puts(&b, "</p>\n");
	}
	if (r == 0)
		r = buf_puts(&b, "</main></body></html>\n");
	if (r < 0) {
		buf_finish(&b);
		return NULL;
	}
	return buf_take(&b, NULL);
}
