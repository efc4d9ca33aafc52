package ses

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/mailspool/mailspool/transport/internal/urlopt"
)

// Scheme is the URL scheme this package opens.
const Scheme = "ses"

// DefaultTimeout bounds one Send when Options.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Options configures a Transport. The zero value uses the standard AWS
// configuration chain for credentials and region.
type Options struct {
	// Region is the AWS region, e.g. "eu-west-1"; empty means the region of
	// the AWS configuration chain (AWS_REGION, the shared config profile).
	Region string
	// ConfigurationSet names the SES configuration set every mail is sent
	// with; empty means none (the identity's default, if any).
	ConfigurationSet string
	// Endpoint is the API base URL, e.g. http://127.0.0.1:8005 for an
	// emulator or test server; empty means the SES endpoint of Region.
	Endpoint string
	// AccessKeyID and SecretAccessKey, when both set, are the only
	// credentials used: the AWS configuration chain (environment, shared
	// files, instance metadata) is not consulted at all. Both empty means
	// the chain provides credentials. Meant for emulators and tests.
	AccessKeyID     string
	SecretAccessKey string
	// Timeout bounds one Send, including reading the answer; zero means
	// DefaultTimeout.
	Timeout time.Duration
}

// Open returns a Transport for the SES v2 API. It loads the AWS
// configuration (or uses the static credentials of opts) and fails when no
// region is known or an option is malformed; it does not contact SES, and
// credentials are resolved at the first Send. A nil opts means the zero
// Options. Errors never contain the secret access key.
func Open(ctx context.Context, opts *Options) (*Transport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		return nil, errors.New("ses: give both an access key id and a secret access key, or neither to use the AWS credential chain")
	}
	if o.Region != "" && !validRegion(o.Region) {
		return nil, fmt.Errorf("ses: region %q is not a region name like eu-west-1", o.Region)
	}
	if o.Endpoint != "" {
		if _, err := urlopt.Endpoint(o.Endpoint); err != nil {
			return nil, fmt.Errorf("ses: %w", err)
		}
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("ses: timeout %v is negative", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	cfg, err := loadConfig(ctx, &o)
	if err != nil {
		return nil, err
	}
	hc := newHTTPClient(cfg.HTTPClient)
	client := sesv2.NewFromConfig(cfg, func(so *sesv2.Options) {
		// One request per Send: the queue owns retries.
		so.Retryer = aws.NopRetryer{}
		so.RetryMaxAttempts = 0
		so.HTTPClient = hc
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
	})
	return &Transport{
		client:  client,
		creds:   cfg.Credentials,
		http:    hc,
		confSet: o.ConfigurationSet,
		timeout: o.Timeout,
	}, nil
}

// loadConfig builds the AWS configuration: only the static credentials and
// region of o when credentials are given, else the standard chain.
func loadConfig(ctx context.Context, o *Options) (aws.Config, error) {
	if o.AccessKeyID != "" {
		if o.Region == "" {
			return aws.Config{}, errors.New("ses: a region is required with static credentials")
		}
		return aws.Config{
			Region:      o.Region,
			Credentials: credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, ""),
		}, nil
	}
	var load []func(*config.LoadOptions) error
	if o.Region != "" {
		load = append(load, config.WithRegion(o.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("ses: load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return aws.Config{}, errors.New("ses: no AWS region: set the region parameter, Options.Region or AWS_REGION")
	}
	if cfg.Credentials == nil {
		return aws.Config{}, errors.New("ses: the AWS configuration provides no credentials")
	}
	return cfg, nil
}

// validRegion reports whether s looks like an AWS region name.
func validRegion(s string) bool {
	if len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// newHTTPClient returns a client that never follows redirects (a redirected
// POST could be a second attempt). It keeps the transport settings of the
// AWS configuration's client, such as a custom CA bundle (AWS_CA_BUNDLE).
// Send bounds each request by its context.
func newHTTPClient(configured aws.HTTPClient) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if bc, ok := configured.(*awshttp.BuildableClient); ok {
		tr = bc.GetTransport()
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
