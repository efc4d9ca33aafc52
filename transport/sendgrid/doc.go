// Package sendgrid is a mailspool transport that sends through the SendGrid
// v3 Web API (POST /v3/mail/send) with github.com/sendgrid/sendgrid-go.
//
// # URL
//
//	sendgrid://apikey:KEY@default?endpoint=https://api.sendgrid.com&timeout=30s
//
// The host names the API: "default" is https://api.sendgrid.com and "eu" is
// https://api.eu.sendgrid.com (for EU-pinned accounts). The API key is the
// URL password; the user name is empty or "apikey" (as in SendGrid's SMTP
// relay). Without a password the key comes from the SENDGRID_API_KEY
// environment variable, which is the better place for it. The key is sent
// only in the Authorization header and never appears in errors or logs.
//
// Query parameters (any other is an error):
//
//	endpoint  API base URL, http or https, e.g. http://127.0.0.1:8025 for a
//	          local test server; overrides the host; not allowed with "eu"
//	timeout   bound on one Send, as a Go duration (default 30s)
//
// # Sending
//
// Each Send is one POST, never retried (the SDK's retrying and async
// variants are not used). The mail goes out as one personalization with the
// one recipient, the subject, a text/plain then a text/html content, the
// reply_to, and the extra headers plus Message-ID. SendGrid's headers are a
// JSON object, so two extra headers with the same name (any case) cannot be
// sent and make Send fail as Permanent.
//
// # Outcomes
//
//	2xx                 Sent; Receipt.MessageID is the X-Message-Id header
//	                    (empty if SendGrid sent none)
//	429                 Temporary, RetryAfter from Retry-After or X-RateLimit-Reset
//	5xx                 Temporary
//	400, 413            Permanent, Detail holds SendGrid's error messages
//	401, 403            Connection: the key, its scopes or the account is wrong
//	3xx                 Connection: redirects are not followed (a
//	                    redirected POST would be a second attempt)
//	other statuses      as package classify maps HTTP statuses
//	no connection, TLS  Connection (via classify.Error)
//	no answer after the
//	whole request body  Temporary with MaybeDelivered set
package sendgrid
