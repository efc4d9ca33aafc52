// Package alert tells an operator, on another channel than mail, when a
// lane needs attention: a worker process checks each lane's thresholds on a
// timer and posts a JSON message to a webhook (github.com/hashicorp/go-retryablehttp,
// retried with backoff), or a Slack-compatible {"text": ...} message.
//
// Conditions, per lane:
//
//	backlog       pending + retry + sending above Thresholds.Backlog
//	failure_rate  last hour's failed / (sent + failed) above Thresholds.FailureRate,
//	              once at least Thresholds.MinAttempts mails finished in the hour
//	stuck         rows in sending more than 5 minutes past their lease (any)
//	sender        rows waiting on a retry, or failed in the last hour, after a
//	              failure of sender scope: the provider refused our account,
//	              sending domain, envelope sender or IP (any)
//	paused        an operator paused the lane (mailspool pause), or a worker's
//	              breaker holds its claiming after connection failures
//	restarting    Thresholds.Restarts or more worker processes of the lane
//	              ended without a clean exit in the last hour
//	member_down   the lane's transport is a composite (failover(...),
//	              roundrobin(...)) and one of its members is down (any)
//
// Each condition sends one alert when it starts and one recovery when it
// ends, however many worker processes watch the lane: their shared state is
// in the mailspool_alerts table (created by queue.Migrate), and the process
// that wins a short lease on a condition's row is the one that posts. A
// condition seen by any process stays active until no process has seen it
// for two check intervals. A post that fails after its retries is tried
// again at the next check; the webhook URL, which usually holds a token,
// never appears in a log line or an error.
package alert
