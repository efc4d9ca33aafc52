package ses

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"
)

// SendQuota is the account's sending quota, as GetAccount reports it.
type SendQuota struct {
	Max24HourSend   float64 // mails per 24 hours
	MaxSendRate     float64 // mails per second
	SentLast24Hours float64
}

// SendQuota asks SES for the account's sending quota (GetAccount; the
// credentials need ses:GetAccount). Errors never contain the secret key.
func (t *Transport) SendQuota(ctx context.Context) (SendQuota, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	out, err := t.client.GetAccount(ctx, &sesv2.GetAccountInput{})
	if err != nil {
		return SendQuota{}, fmt.Errorf("ses: GetAccount: %w", err)
	}
	if out.SendQuota == nil {
		return SendQuota{}, fmt.Errorf("ses: GetAccount returned no SendQuota")
	}
	return SendQuota{Max24HourSend: out.SendQuota.Max24HourSend, MaxSendRate: out.SendQuota.MaxSendRate, SentLast24Hours: out.SendQuota.SentLast24Hours}, nil
}

// QuotaFromURL opens the transport u names (a "ses://" URL) and asks for
// its account's sending quota.
func QuotaFromURL(ctx context.Context, u *url.URL) (SendQuota, error) {
	opts, err := optionsFromURL(u)
	if err != nil {
		return SendQuota{}, err
	}
	t, err := Open(ctx, opts)
	if err != nil {
		return SendQuota{}, err
	}
	defer t.Close()
	return t.SendQuota(ctx)
}
