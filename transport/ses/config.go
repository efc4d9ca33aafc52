package ses

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

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
