/* SPDX-License-Identifier: MIT */
/*
 * request_state: the requestState of a multi round-trip request (MCP
 * 2026-07-28, SEP-2322), an opaque string the server hands the client with an
 * InputRequiredResult and gets back on the retry. It carries a JSON object
 * the caller builds (the answers of earlier rounds, what the state is bound
 * to, an expiry) sealed with HMAC-SHA256, so a client can return it but not
 * alter it: the text is "<base64 payload>.<base64 tag>". request_state_open()
 * checks the size, the encoding and the tag (in constant time) before the
 * payload is parsed, so only text this server sealed reaches the JSON
 * parser, and then the expiry. The payload is readable by the client (it is
 * signed, not encrypted): put nothing in it the client may not see.
 * Stateless and thread-safe.
 */
#ifndef MCPSD_REQSTATE_H
#define MCPSD_REQSTATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define REQUEST_STATE_KEY_LEN 32
/* The longest state text accepted or made (the payload is 3/4 of it). */
#define REQUEST_STATE_MAX_TEXT (256 * 1024)

/*
 * Derives the sealing key from a secret shared by every instance behind one
 * URL (FILE_SECRET), so a retry may reach any of them; label separates it
 * from the secret's other uses.
 */
void request_state_key(const unsigned char *secret, size_t secret_len,
                       unsigned char key[REQUEST_STATE_KEY_LEN]);

/*
 * Seals payload (borrowed; an object) after setting its "exp" member to
 * expires (seconds, wall clock). Returns the text (caller frees with free())
 * or NULL when memory ran out or the text would be longer than
 * REQUEST_STATE_MAX_TEXT.
 */
char *request_state_seal(const unsigned char key[REQUEST_STATE_KEY_LEN],
                         cJSON *payload, long long expires);

/*
 * Opens text[0..len): -E2BIG (too long), -EINVAL (not a state this server
 * sealed, or altered), -ETIMEDOUT (expired at now, seconds). On success
 * *payload is the object (caller owns, cJSON_Delete). err gets a message for
 * the client in every case of failure.
 */
__attribute__((warn_unused_result)) int
request_state_open(const unsigned char key[REQUEST_STATE_KEY_LEN],
                   const char *text, size_t len, long long now, cJSON **payload,
                   char *err, size_t errlen);

#endif
