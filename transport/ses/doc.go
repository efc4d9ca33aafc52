// Package ses is a mailspool transport that sends through the Amazon SES v2
// SendEmail API with github.com/aws/aws-sdk-go-v2/service/sesv2.
//
// # URL
//
//	ses://default?region=eu-west-1&configuration_set=NAME&timeout=30s
//	ses://ACCESS_KEY_ID:SECRET@default?region=us-east-1&endpoint=http://127.0.0.1:8005
//
// The host is always "default". Credentials come from the standard AWS
// chain (environment, shared config and credential files, SSO, the
// instance or task role), as does the region when the URL gives none. An
// access key id and secret access key in the URL's user info replace the
// chain entirely — no environment, file or instance metadata is read — and
// are meant for emulators and tests; the secret is only used to sign
// requests and never appears in errors or logs.
//
// Query parameters (any other is an error):
//
//	region             AWS region, e.g. eu-west-1 (required with user info)
//	configuration_set  SES configuration set to send with
//	endpoint           API base URL, http or https, e.g. a local emulator
//	timeout            bound on one Send, as a Go duration (default 30s)
//
// # Sending
//
// Each Send is exactly one SendEmail request: the SDK's retryer is
// aws.NopRetryer and redirects are not followed. The mail goes out as raw
// MIME (Content.Raw), so the Message-ID, Reply-To and extra headers such as
// List-Unsubscribe reach the recipient as given; the destination is the one
// To address. Receipt.MessageID is the MessageId SES returns.
//
// # Outcomes
//
// Code is the HTTP status and Detail the SES error code and message.
//
//	MessageRejected, BadRequestException   Permanent, unless the message
//	                                        blames our setup (sandbox "Email
//	                                        address is not verified", ...):
//	                                        then Connection
//	MailFromDomainNotVerifiedException,
//	AccountSuspendedException,
//	SendingPausedException, NotFoundException,
//	bad or expired credentials, AccessDenied,
//	no credentials in the chain            Connection: our setup is wrong
//	TooManyRequestsException, Throttling,
//	LimitExceededException                 Temporary
//	InternalFailure, ServiceUnavailable     Temporary
//	other codes and non-AWS answers         by HTTP status as package
//	                                        classify maps it, but never
//	                                        Permanent
//	a redirect (never followed)             Connection: the endpoint is wrong
//	no connection, TLS, timeout before
//	the request was written                 as classify.Error maps it
//	no answer after the whole request       Temporary with MaybeDelivered
//	200 whose body does not parse or
//	has no MessageId                        Temporary with MaybeDelivered
//
// A Retry-After header on an error answer sets RetryAfter.
package ses
